;;;; swank.lisp - `rontolisp swank': a Swank server for SLIME and Sly on a
;;;; loopback address, with Debian's cl-swank loaded through ASDF (its
;;;; first load compiles it into the ASDF cache, about a minute; later ones
;;;; take a second).  Its threads start in RONTOLISP-USER, and M-. finds the
;;;; Lisp sources through the RONTOLISP logical host (see
;;;; INSTALL-SOURCE-TRANSLATIONS).

(in-package "RONTOLISP")

(defun loopback-address-p (address)
  "True when ADDRESS names the loopback interface: 127.x.x.x, ::1 or
localhost."
  (or (string-equal address "localhost")
      (string= address "::1")
      (let ((parts (ignore-errors
                    (loop with start = 0
                          for dot = (position #\. address :start start)
                          collect (parse-integer address :start start :end dot)
                          while dot do (setf start (1+ dot))))))
        (and (= 4 (length parts)) (= 127 (first parts))
             (every (lambda (p) (<= 0 p 255)) parts)))))

(defun load-swank ()
  "Load Debian's cl-swank (system SWANK) unless it is loaded already.
Signals RONTOLISP-ERROR naming the package to install when it is absent."
  (unless (find-package "SWANK")
    (let ((*load-verbose* nil))
      (require "asdf"))
    (unless (funcall (find-symbol "FIND-SYSTEM" "ASDF") "swank" nil)
      (rontolisp-error 'swank "expected the ASDF system swank (Debian package cl-swank), found none"))
    (format *error-output* "~&; loading Swank (the first time compiles it)~%")
    (finish-output *error-output*)
    ;; The compiler's chatter is not the user's business; its errors are.
    (let ((*standard-output* (make-broadcast-stream))
          (*compile-verbose* nil) (*compile-print* nil)
          (*load-verbose* nil))
      (handler-bind ((warning #'muffle-warning))
        (funcall (find-symbol "LOAD-SYSTEM" "ASDF") "swank")))))

(defun start-swank (&key (port 4005) (interface "127.0.0.1"))
  "Start a Swank server on INTERFACE (a loopback address) and PORT (0: a
free one) whose threads start in package RONTOLISP-USER; answers the
port it listens on."
  (unless (loopback-address-p interface)
    (usage-error "--interface expects a loopback address (127.x.x.x, ::1 or localhost), found ~S"
                 interface))
  (load-swank)
  (let ((user (find-package "RONTOLISP-USER")))
    ;; SETF, not LET: the server's threads see global values.
    (setf *package* user)
    (setf (symbol-value (find-symbol "*DEFAULT-WORKER-THREAD-BINDINGS*" "SWANK"))
          (list (cons '*package* user)))
    (funcall (find-symbol "CREATE-SERVER" "SWANK")
             :port port :interface interface :dont-close t)))

(define-command "swank" ()
    (:usage "[--port N] [--interface ADDRESS]"
     :summary "serve SLIME or Sly (Swank) on a loopback port until interrupted"
     :details "Connect from Emacs with M-x slime-connect (or M-x sly-connect) RET 127.0.0.1 RET PORT.
The first start compiles Debian's cl-swank into the ASDF cache (about a minute).
Ctrl-C or SIGTERM stops the server."
     :options ((port "--port N" :parse (integer-parser :min 0 :max 65535) :default 4005
                     :help "the TCP port (default 4005; 0 picks a free one)")
               (interface "--interface ADDRESS" :default "127.0.0.1"
                          :help "a loopback address to listen on (default 127.0.0.1)")))
  (let ((actual (start-swank :port port :interface interface)))
    (format t "Swank listening on ~A port ~D~%" interface actual)
    (finish-output)
    ;; The server runs in its own threads; this one only keeps the process.
    (loop (sleep 3600))))
