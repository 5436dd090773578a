;;;; split.lisp - `rontolisp split IN PREFIX' and `rontolisp merge
;;;; FIRST-SHARD OUT': a GGUF file cut into shards that llama.cpp loads, as
;;;; its llama-gguf-split does, and a set of shards joined back into one
;;;; file.  The shards themselves are lisp/shards.lisp's.

(in-package "RONTOLISP")

(defun split-size-parser (option string)
  "The byte count of a --max-size STRING as llama-gguf-split reads it: a
positive integer followed by M (10^6 bytes) or G (10^9 bytes)."
  (let* ((n (length string))
         (unit (and (plusp n) (char string (1- n))))
         (count (and (> n 1) (every #'digit-char-p (subseq string 0 (1- n)))
                     (parse-integer string :end (1- n)))))
    (unless (and (member unit '(#\M #\G)) count (plusp count))
      (usage-error "~A expects a positive integer followed by M (megabytes, 10^6 bytes) or G ~
(gigabytes, 10^9 bytes), such as 500M or 2G; found ~S" option string))
    (* count (if (char= unit #\M) 1000000 1000000000))))

(defun shard-total-bytes (group alignment)
  (loop for info in group sum (gguf::padded (gguf:tensor-info-bytes info) alignment)))

(defun print-split-plan (stream prefix groups alignment)
  "One line on STREAM per group of GROUPS (GGUF:SPLIT-PLAN's) for shards
named after PREFIX: the shard's name, its tensors and bytes of tensor data
(padded to ALIGNMENT)."
  (loop with count = (length groups)
        for group in groups
        for i from 0
        do (format stream (formatter "~A: ~D tensor~:P, ~D bytes of tensor data~%")
                   (gguf:shard-path prefix i count) (length group)
                   (shard-total-bytes group alignment))))

(define-command "split" (in prefix)
    (:usage "IN.gguf PREFIX [--max-tensors N | --max-size N(M|G)] [--dry-run]"
     :summary "split a GGUF file into shards PREFIX-00001-of-0000N.gguf as llama-gguf-split does"
     :details "The shards are those llama.cpp's llama-gguf-split writes and its loader
reads given the first: the first carries all the metadata, every shard
split.no, split.count and split.tensors.count; tensors keep their order
and bytes.  Without an option a shard holds at most 128 tensors.  With
--max-size a shard's tensor data (each tensor padded to the alignment)
stays within the size; a larger tensor gets a shard of its own.  The
shards are written under temporary names and renamed when all are
written, so a failure leaves none behind.  IN may itself be the first shard
of a set: the whole set is split anew."
     :options ((max-tensors "--max-tensors N" :parse (integer-parser :min 1)
                            :help "at most N tensors per shard (default 128)")
               (max-size "--max-size N(M|G)" :parse #'split-size-parser
                         :help "at most N megabytes (10^6 bytes) or gigabytes (10^9) of tensor data per shard")
               (dry-run "--dry-run" :help "print the shards and write nothing")))
  (when (and max-tensors max-size)
    (usage-error "expected --max-tensors or --max-size, found both"))
  (let ((f (gguf:read in :shards t)))
    (unwind-protect
         (let ((groups (gguf:split-plan f :max-tensors max-tensors :max-bytes max-size)))
           (print-split-plan *standard-output* prefix groups (gguf:alignment f))
           (unless dry-run
             (gguf:write-shards prefix f :max-tensors max-tensors :max-bytes max-size)
             (format t "~D shard~:P written, ~D tensor~:P~%" (length groups)
                     (length (gguf:tensor-infos f)))))
      (gguf:close f)))
  0)

(define-command "merge" (first out)
    (:usage "FIRST-SHARD.gguf OUT.gguf"
     :summary "join a set of GGUF shards (as llama-gguf-split writes them) into one file"
     :details "FIRST-SHARD is PREFIX-00001-of-0000N.gguf; the other shards are found
beside it by their names.  OUT gets the first shard's metadata without
split.no, split.count and split.tensors.count, and every shard's tensors
in order, bytes unchanged: a file split by `rontolisp split' merges back
to the same bytes.  A shard missing, of another set or with counts that
disagree is refused before anything is written; OUT is written under a
temporary name and renamed.")
  (gguf:merge-shards first out)
  (format t "~A: merged from ~A~%" out first)
  0)
