;;;; commands/swank.lisp - `rontolisp swank': its command line; the work
;;;; is in session/swank.lisp.

(in-package "COMMAND-LINE")

(define-command "swank" ()
    (:usage "[--port N] [--interface ADDRESS]"
     :summary "serve SLIME or Sly (Swank) on a loopback port until interrupted"
     :details "Connect from Emacs with M-x slime-connect (or M-x sly-connect) RET 127.0.0.1 RET PORT.
ADDRESS is 127.0.0.1 (or another 127.x.y.z in dotted decimal), ::1 or localhost.
At most 32 connections are served at once; more are told so and closed.
A connection that closes ends the evaluations it started.
Ctrl-C or SIGTERM stops the server."
     :options ((port "--port N" :parse (integer-parser :min 0 :max 65535) :default 4005
                     :help "the TCP port (default 4005; 0 picks a free one)")
               (interface "--interface ADDRESS" :default "127.0.0.1"
                          :help "a loopback address to listen on (default 127.0.0.1; ::1 for IPv6)")))
  (let ((actual (start-swank :port port :interface interface)))
    (format t "Swank listening on ~A port ~D~%" interface actual)
    (finish-output)
    ;; The server runs in its own threads; this one only keeps the process.
    (loop (sleep 3600))))
