;;;; conditions.lisp - the conditions of the encoder, its tokenizer and its
;;;; decision head, each a RONTOLISP-ERROR (lisp/conditions.lisp says how
;;;; they are defined and signalled).

(in-package "MODEL")

;;; The encoder (model.lisp).

(define-error model-error ()
    ((path "The file a MODEL:MODEL-ERROR is about."))
  (:documentation "A GGUF file that is not a modern-bert encoder MODEL:LOAD
can run: a missing tensor or key, a key of the wrong type, a tensor of the
wrong shape; PATH names the file.")
  (:signal (path) "Signal MODEL:MODEL-ERROR about the GGUF file PATH."))

;;; Questions for the decision head (decision.lisp).

(define-error question-error ()
    ()
  (:documentation "A question the decision head cannot answer: not a
question object, a missing field, an unknown type, no options, a marker
count other than the option count, more tokens than decision.max_tokens, an
option's marker beyond the head's window.")
  (:signal () "Signal MODEL:QUESTION-ERROR with the message CONTROL and ARGS format."
   :message (apply #'format nil control args)))

;;; Tokenizers (tokenizer.lisp).

(define-error tokenizer-error ()
    ((path "The file a MODEL:TOKENIZER-ERROR is about, or NIL."))
  (:documentation "A tokenizer that cannot be built or used: a GGUF file or
tokenizer.json of another kind (SentencePiece, WordPiece, another
pre-tokenizer), a malformed or oversized one, a text that is not UTF-8, an
id outside the vocabulary.  PATH names the tokenizer's file (or NIL).")
  (:signal (path) "Signal MODEL:TOKENIZER-ERROR about the tokenizer file PATH (NIL leaves
the file out of the message)."))
