;;;; commands/merge.lisp - `rontolisp merge': its command line; the work
;;;; is in jobs/split.lisp.

(in-package "COMMAND-LINE")

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
