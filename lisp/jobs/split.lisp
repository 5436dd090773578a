;;;; split.lisp - `rontolisp split IN PREFIX' and `rontolisp merge
;;;; FIRST-SHARD OUT': a GGUF file cut into shards that llama.cpp loads, as
;;;; its llama-gguf-split does, and a set of shards joined back into one
;;;; file.  The shards themselves are lisp/gguf/shards.lisp's.

(in-package "COMMAND-LINE")

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
  (loop for info in group sum (padded (gguf:tensor-info-bytes info) alignment)))

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
