;;;; conditions.lisp - the conditions of GGUF files and shard sets, each a
;;;; RONTOLISP-ERROR (lisp/conditions.lisp says how they are defined and
;;;; signalled).  The C glue signals FILE-CLOSED-ERROR too.

(in-package "GGUF")

(define-error file-closed-error ()
    ()
  (:documentation "A tensor or file object used after gguf:close released
its file.")
  (:signal (path) "Signal GGUF:FILE-CLOSED-ERROR about the file at PATH."))

(define-error gguf-error ()
    ((path "The file a GGUF-ERROR is about.")
     (offset "The byte offset of the field at fault, or NIL.")
     (reason "A keyword naming the problem of a GGUF-ERROR."))
  (:documentation "A GGUF file that cannot be read or written: PATH names
the file, OFFSET the byte at fault (or NIL), REASON a keyword naming the
problem (:truncated, :misaligned-tensor, ...); the message says what was
expected and what was found.")
  (:signal (path reason offset) "Signal GGUF:GGUF-ERROR about the file PATH (or NIL for a file object
not yet written): REASON a keyword, OFFSET the byte at fault or NIL."))

;;; Shard sets (shards.lisp): REASON is :missing-shard, :foreign-shard or
;;; :shard-count.

(define-error shard-error (gguf-error)
    ()
  (:documentation "A set of GGUF shards (PREFIX-00001-of-0000N.gguf, as
llama.cpp's gguf-split writes them) that does not hold together; PATH names
the shard at fault."))

(define-error missing-shard-error (shard-error)
    ()
  (:documentation "A shard of a set is missing: PATH names the file that
should be there."))

(define-error foreign-shard-error (shard-error)
    ()
  (:documentation "A file in a shard's place that is not that shard of this
set: its split.no is not its place, or it is not a shard at all."))

(define-error shard-count-error (shard-error)
    ()
  (:documentation "The counts of a shard set disagree: split.count or
split.tensors.count differ between shards, or the tensors found are not
as many as split.tensors.count says."))

;; One signaller for the three subclasses: its first argument names the
;; class, which also decides the REASON.
(defun shard-error (class path offset control &rest args)
  "Signal the SHARD-ERROR subclass CLASS about the shard PATH."
  (error class :path path
               :reason (ecase class
                         (missing-shard-error :missing-shard)
                         (foreign-shard-error :foreign-shard)
                         (shard-count-error :shard-count))
               :offset offset
               :message (error-message path control args)))
