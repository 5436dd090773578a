;;;; commands/split.lisp - `rontolisp split': its command line; the work
;;;; is in jobs/split.lisp.

(in-package "COMMAND-LINE")

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
