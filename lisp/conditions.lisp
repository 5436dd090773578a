;;;; conditions.lisp - every condition rontolisp signals, rooted at one class.
;;;;
;;;; Callers handle our errors by type: RONTOLISP-ERROR catches them all, and
;;;; each kind of failure has a subclass with slots naming what was expected
;;;; and what was found.  The C primitives signal these classes too.

(in-package "RONTOLISP")

(define-condition rontolisp-error (error)
  ((message :initarg :message :initform nil :reader rontolisp-error-message))
  (:documentation "The root of every error rontolisp signals.  Its message
says what was expected and what was found.")
  (:report (lambda (c s)
             (write-string (or (rontolisp-error-message c)
                               "unspecified rontolisp error")
                           s))))

(setf (documentation 'rontolisp-error-message 'function)
      "The message of a RONTOLISP-ERROR: what was expected and what was found.")

(define-condition usage-error (rontolisp-error)
  ()
  (:documentation "The command line was not understood.  The command-line
front end prints the usage string and exits with status 2."))

(defun usage-error (fmt &rest args)
  (error 'usage-error :message (apply #'format nil fmt args)))
