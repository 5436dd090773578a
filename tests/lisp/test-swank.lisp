;;;; test-swank.lisp - `rontolisp swank': a server on 127.0.0.1 answers a
;;;; minimal Swank request and is stopped; it refuses other interfaces;
;;;; compiled functions name their sources through the RONTOLISP host.

(in-package "RONTOLISP-TESTS")

(def-suite swank :in all :description "The Swank server and source locations.")
(in-suite swank)

(defun swank-send (stream form-string)
  "Send one Swank message: six hex digits of length, then the form."
  (format stream "~6,'0X~A" (length form-string) form-string)
  (finish-output stream))

(defun swank-reply (stream id deadline)
  "Read Swank messages until the (:return ... ID) one, which is answered as
a string; NIL if none came before DEADLINE."
  (loop
    (loop until (listen stream)
          do (when (> (get-internal-real-time) deadline)
               (return-from swank-reply nil))
             (sleep 0.05))
    (let* ((header (let ((h (make-string 6))) (read-sequence h stream) h))
           (n (parse-integer header :radix 16))
           (message (make-string n)))
      (read-sequence message stream)
      (when (and (search "(:return" message)
                 (search (format nil " ~D)" id) message :from-end t))
        (return message)))))

;;; A server in a child process, stopped with a deadline.

(defun unshare-works-p ()
  "True when this process may run a command in a mount namespace of its
own (root, as in a container): then a test can hide /etc/protocols."
  (eql 0 (ignore-errors (sh "unshare -m sh -c 'mount --bind /dev/null /etc/protocols' >/dev/null 2>&1"))))

(defun stop-process (process)
  "SIGTERM to PROCESS, then its end awaited for 20 s (WAIT-CHILD, which
kills it and signals an error at that deadline); answers how it ended and
its code, as EXT:EXTERNAL-PROCESS-WAIT does."
  (signal-process process 15)
  (unwind-protect (wait-child process :deadline 20 :what "rontolisp swank after SIGTERM")
    (end-child process)))

(defun protocol-lookup-shim ()
  "The path of a shared object, compiled here with cc, whose getprotobyname
and getprotobyname_r find nothing (LD_PRELOAD it: the protocol database
looks empty without root); NIL when it cannot be compiled."
  (let ((source (tmp-path "noproto.c")) (object (tmp-path "noproto.so")))
    (write-file-string source "#include <errno.h>
#include <netdb.h>
#include <stddef.h>
struct protoent *getprotobyname(const char *name) { (void)name; return NULL; }
int getprotobyname_r(const char *name, struct protoent *r, char *buf, size_t n,
                     struct protoent **out) {
  (void)name; (void)r; (void)buf; (void)n; *out = NULL; return ENOENT;
}
")
    (prog1 (and (eql 0 (sh "cc -shared -fPIC -o \"$2\" \"$1\" 2>/dev/null" source object)) object)
      (ignore-errors (delete-file source)))))

(defun call-with-swank-server (args function &key cache hide-protocols preload (flags '()))
  "Run `rontolisp FLAGS swank --port 0 ARGS' with XDG_CACHE_HOME at CACHE
(and /etc/protocols empty in a mount namespace of its own when
HIDE-PROTOCOLS), call FUNCTION with the port it announces (NIL when none
came within 60 s), the text of its standard output and the path of its
standard error; stop it and answer FUNCTION's value, then how the server
ended and its code."
  (let* ((out (tmp-path "swank-out")) (err (tmp-path "swank-err"))
         (command (append (list *exe*) flags (list "swank" "--port" "0") args))
         (argv (append (list (format nil "XDG_CACHE_HOME=~A" (or cache (tmp-path "cache"))))
                       (when preload (list (format nil "LD_PRELOAD=~A" preload)))
                       (when hide-protocols
                         (list "unshare" "-m" "/bin/sh" "-c"
                               "mount --bind /dev/null /etc/protocols && exec \"$@\"" "sh"))
                       command))
         (process (run-child "env" argv :input nil :output out :error err
                                        :if-output-exists :supersede
                                        :if-error-exists :supersede :wait nil))
         (deadline (+ (get-internal-real-time) (* 60 internal-time-units-per-second)))
         (value nil))
    (unwind-protect
         (let* ((line (wait-for-line out "Swank listening on " deadline))
                (port (and line (parse-integer line :start (1+ (position #\Space line :from-end t))
                                                    :junk-allowed t))))
           (setf value (funcall function port (or (ignore-errors (read-file-string out)) "") err)))
      (multiple-value-bind (how code) (stop-process process)
        (ignore-errors (delete-file out))
        (ignore-errors (delete-file err))
        (return-from call-with-swank-server (values value how code))))))

(defun swank-connect (port)
  "A character stream on a new TCP connection to 127.0.0.1:PORT."
  (require 'sockets)
  (let ((socket (make-instance (find-symbol "INET-SOCKET" "SB-BSD-SOCKETS")
                               :type :stream :protocol 6)))
    (funcall (find-symbol "SOCKET-CONNECT" "SB-BSD-SOCKETS") socket #(127 0 0 1) port)
    (funcall (find-symbol "SOCKET-MAKE-STREAM" "SB-BSD-SOCKETS") socket
             :input t :output t :buffering :full :element-type 'character)))

(defun swank-greeting (stream id deadline)
  "Ask the server on STREAM for its connection info (request ID) and answer
:ACCEPTED when it answers, :REFUSED when it sends a message saying so and
closes, NIL when neither came before DEADLINE."
  (ignore-errors (swank-send stream (format nil "(:emacs-rex (swank:connection-info) nil t ~D)" id)))
  (loop
    (loop until (ignore-errors (listen stream))
          do (when (or (> (get-internal-real-time) deadline)
                       (not (open-stream-p stream)))
               (return-from swank-greeting nil))
             (sleep 0.05))
    (let* ((header (let ((h (make-string 6))) (and (= 6 (read-sequence h stream)) h)))
           (n (and header (parse-integer header :radix 16 :junk-allowed t)))
           (message (and n (let ((m (make-string n))) (subseq m 0 (read-sequence m stream))))))
      (cond ((null message) (return nil))
            ((search "connection refused" message) (return :refused))
            ((search "(:return (:ok (:pid" message) (return :accepted))))))

(defun files-under (directory)
  "The files under DIRECTORY (a string naming a directory), as strings."
  (multiple-value-bind (code out) (sh "find \"$1\" -type f 2>/dev/null" directory)
    (declare (ignore code))
    (split-lines out)))

(test swank-answers-on-loopback-and-stops
  ;; On a system without /etc/protocols (as a minimal Debian is, or hidden
  ;; here when this process may do so), with an empty cache: `make'
  ;; compiled cl-swank, so the start compiles nothing and writes nothing
  ;; there.
  (let* ((cache (tmp-path "cache"))
         (absent (not (probe-file "/etc/protocols")))
         (hide (and (not absent) (unshare-works-p)))
         ;; Without the right to hide the file (a container), a shim makes
         ;; every protocol lookup fail instead (cl-swank's own socket then
         ;; fails with "Protocol not found").
         (shim (and (not absent) (not hide) (protocol-lookup-shim)))
         (info "") (answer "") (busy nil))
    (unless (or absent hide shim)
      (skip "neither unshare -m nor cc works here: the protocol database stays visible"))
    (multiple-value-bind (port how code)
        (call-with-swank-server
         '() (lambda (port out err)
               (is (integerp port) "no port announced in ~S: ~A" out
                   (ignore-errors (read-file-string err)))
               (when port
                 (let ((s (swank-connect port))
                       (deadline (+ (get-internal-real-time) (* 30 internal-time-units-per-second))))
                   (swank-send s "(:emacs-rex (swank:connection-info) nil t 1)")
                   (setf info (or (swank-reply s 1 deadline) ""))
                   (swank-send s "(:emacs-rex (swank:eval-and-grab-output \"(package-name *package*)\") nil t 2)")
                   (setf answer (or (swank-reply s 2 deadline) ""))
                   (ignore-errors (close s)))
                 ;; A second server on the same port: one line, exit 1.
                 (setf busy (multiple-value-list
                             (sh "timeout 60 \"$0\" swank --port \"$1\"" (princ-to-string port)))))
               port)
         :cache cache :hide-protocols hide :preload shim)
      (declare (ignore port))
      (is (eq :exited how))
      (is (eql 143 code)))
    (is (contains info "(:return (:ok (:pid") "connection-info answered ~S" info)
    (is (contains info "RONTOLISP-USER"))
    (is (contains answer "\\\"RONTOLISP-USER\\\"") "eval answered ~S" answer)
    (destructuring-bind (&optional code out err) busy
      (declare (ignore out))
      (is (eql 1 code) "a busy port answered ~S ~S" code err)
      (is (= 1 (length (split-lines (or err "")))) "~S" err)
      (is (contains (or err "") "Address already in use") "~S" err))
    (is (null (files-under cache)) "the start wrote ~S" (files-under cache))
    (sh "rm -rf \"$1\"" cache)
    (when shim (ignore-errors (delete-file shim)))))

(test swank-serves-ipv6-loopback
  (multiple-value-bind (reply how)
      (call-with-swank-server
       '("--interface" "::1")
       (lambda (port out err)
         (is (integerp port) "no port announced in ~S: ~A" out (ignore-errors (read-file-string err)))
         (is (contains out "Swank listening on ::1 port "))
         (and port
              (nth-value 1 (sh "timeout 30 bash -c 'exec 3<>/dev/tcp/::1/$1 || exit 3
m=\"(:emacs-rex (swank:connection-info) nil t 1)\"
printf \"%06x%s\" ${#m} \"$m\" >&3
head -c 300 <&3' bash \"$1\"" (princ-to-string port))))))
    (is (eq :exited how))
    (is (contains (or reply "") "(:return (:ok (:pid") "::1 answered ~S" reply)))

(test swank-refuses-other-interfaces
  ;; Each bad value: one line naming it and what is expected, the usage
  ;; after it, exit 2; nothing is bound.  0127.0.0.1 would be bound as
  ;; 87.0.0.1 by a resolver that reads it as octal.
  (dolist (bad '("0.0.0.0" "0127.0.0.1" " 127.0.0.1" "+127.0.0.1" "127.1" "127.0.0.1 "
                 "::ffff:127.0.0.1" "::2" "" "localhost."))
    (multiple-value-bind (code out err)
        (sh "timeout 60 \"$0\" swank --port 0 --interface \"$1\"" bad)
      (declare (ignore out))
      (is (eql 2 code) "~S: exit ~S, ~S" bad code err)
      (let ((first (first (split-lines err))))
        (is (contains (or first "") (prin1-to-string bad)) "~S: ~S" bad err)
        (is (contains (or first "") "expects a loopback address") "~S: ~S" bad err))))
  (dolist (good '("127.0.0.1" "127.255.0.9" "::1" "0:0:0:0:0:0:0:1" "localhost"))
    (is (command-line::loopback-address-p good) "~S" good))
  (is (null (command-line::parse-address "0127.0.0.1")))
  (is (equalp #(127 0 0 1) (command-line::parse-address "127.0.0.1")))
  (is (equalp #(0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1) (command-line::parse-address "::1")))
  (is (not (command-line::loopback-address-p "127.0.0")))
  (is (not (command-line::loopback-address-p "10.0.0.1"))))

(test swank-refuses-connections-beyond-the-limit
  ;; A limit of 3: a fourth connection is told so and closed, the server
  ;; says so on stderr; once one closes, a new one is served again.
  (let ((states '()) (again nil) (log ""))
    (call-with-swank-server
     '() (lambda (port out err)
           (is (integerp port) "no port announced in ~S" out)
           (when port
             (let ((deadline (+ (get-internal-real-time) (* 60 internal-time-units-per-second)))
                   (streams (loop repeat 4 collect (swank-connect port))))
               (unwind-protect
                    (progn
                      (setf states (loop for s in streams for id from 1
                                         collect (swank-greeting s id deadline)))
                      (close (first streams))
                      ;; The server closes its side when it sees ours go.
                      (loop for id from 10 below 200
                            for s = (swank-connect port)
                            for state = (unwind-protect (swank-greeting s id deadline)
                                          (ignore-errors (close s)))
                            until (or (eq state :accepted) (null state)
                                      (> (get-internal-real-time) deadline))
                            finally (setf again state)))
                 (dolist (s streams) (ignore-errors (close s))))
               (setf log (or (ignore-errors (read-file-string err)) "")))))
     :flags '("--eval" "(setf command-line::*swank-connection-limit* 3)"))
    (is (equal '(:accepted :accepted :accepted :refused) states) "~S" states)
    (is (eq :accepted again) "after one closed: ~S" again)
    (is (contains log "connection refused: expected fewer than 3 open connections") "~S" log)))

(defun call-with-swank-port (function &rest keys)
  "Start a server (CALL-WITH-SWANK-SERVER with KEYS), call FUNCTION with
the port it announces and a deadline 60 s away (checking that a port came;
FUNCTION is not called without one), stop the server and check that
SIGTERM ended it; answers FUNCTION's value."
  (multiple-value-bind (value how code)
      (apply #'call-with-swank-server
             '() (lambda (port out err)
                   (is (integerp port) "no port announced in ~S: ~A" out
                       (ignore-errors (read-file-string err)))
                   (when port
                     (funcall function port (+ (get-internal-real-time)
                                               (* 60 internal-time-units-per-second)))))
             keys)
    (is (eq :exited how))
    (is (eql 143 code) "the server ended ~S ~S" how code)
    value))

(defun swank-eval (stream form-string id deadline)
  "Evaluate FORM-STRING in the server of STREAM (request ID) and answer the
printed value as Swank returns it (\"NIL\", \"T\"...); NIL when no answer
came before DEADLINE."
  (swank-send stream (format nil "(:emacs-rex (swank:eval-and-grab-output ~S) nil t ~D)"
                             form-string id))
  (let* ((reply (swank-reply stream id deadline))
         (start (and reply (search "(:ok (\"\" " reply))))
    (and start (ignore-errors (read-from-string reply t nil :start (+ start 9))))))

(defun swank-poll (stream form-string value deadline)
  "Evaluate FORM-STRING on STREAM (SWANK-EVAL) until it answers the string
VALUE, or until DEADLINE; answers the last answer."
  (loop for id from 100
        for answer = (swank-eval stream form-string id deadline)
        until (or (equal answer value) (> (get-internal-real-time) deadline))
        do (sleep 0.1)
        finally (return answer)))

(test swank-ends-the-evaluations-of-a-closed-connection
  ;; A client starts an endless evaluation and goes away: the evaluation
  ;; ran on (an endless COLLECT grew the server to 1.6 GB).  Now its
  ;; thread ends with the connection; a second client watches it.
  (let ((started nil) (running :unknown))
    (call-with-swank-port
     (lambda (port deadline)
       (let ((client (swank-connect port))
             (watcher (swank-connect port)))
         (unwind-protect
              (progn
                (swank-send client "(:emacs-rex (swank:eval-and-grab-output \"(progn (defparameter *endless* mp:*current-process*) (loop))\") nil t 1)")
                (setf started (swank-poll watcher "(and (boundp '*endless*) (mp:process-active-p *endless*) t)"
                                          "T" deadline))
                (close client)
                (setf running (swank-poll watcher "(mp:process-active-p *endless*)" "NIL" deadline)))
           (ignore-errors (close client))
           (ignore-errors (close watcher))))))
    (is (equal "T" started) "the evaluation started: ~S" started)
    (is (equal "NIL" running) "the evaluation still running after its client closed: ~S" running)))

(defun swank-message-with (stream text deadline)
  "Read Swank messages from STREAM until one that contains TEXT, answered
as a string; NIL when none came before DEADLINE or the stream ended."
  (loop
    (loop until (ignore-errors (listen stream))
          do (when (or (> (get-internal-real-time) deadline)
                       (not (open-stream-p stream)))
               (return-from swank-message-with nil))
             (sleep 0.05))
    (let* ((header (let ((h (make-string 6))) (and (= 6 (read-sequence h stream)) h)))
           (n (and header (parse-integer header :radix 16 :junk-allowed t)))
           (message (and n (let ((m (make-string n))) (subseq m 0 (read-sequence m stream))))))
      (cond ((null message) (return nil))
            ((search text message) (return message))))))

(test swank-survives-deeply-nested-messages
  ;; 50,000 nested parentheses as a message, and as a form sent to be
  ;; evaluated: the server crashed with SIGSEGV reading either.  Now the
  ;; first is a reader error sent back, the second a READ-NESTING-ERROR in
  ;; the debugger, and the server goes on answering.
  (let ((deep (make-string 50000 :initial-element #\())
        (answers '()))
    (is (eq t (call-with-swank-port
               (lambda (port deadline)
                 (let ((s (swank-connect port)))
                   (unwind-protect
                        (progn
                          (swank-send s deep)
                          (push (swank-message-with s "(:reader-error" deadline) answers)
                          (push (swank-greeting s 2 deadline) answers)
                          (swank-send s (format nil "(:emacs-rex (swank:eval-and-grab-output ~S) nil t 3)"
                                                deep))
                          (push (swank-message-with s "(:debug " deadline) answers))
                     (ignore-errors (close s))))
                 (let ((s (swank-connect port)))
                   (unwind-protect (push (swank-greeting s 4 deadline) answers)
                     (ignore-errors (close s))))
                 t))))
    (destructuring-bind (&optional fourth third second first) answers
      (is (and first (search "nested" first)) "the deep message: ~S" (and first (subseq first 0 (min 300 (length first)))))
      (is (eq :accepted second) "after the deep message: ~S" second)
      (is (and third (search "nested at most 1000 deep" third)) "the deep form: ~S"
          (and third (subseq third 0 (min 300 (length third)))))
      (is (eq :accepted fourth) "a new connection: ~S" fourth))))

(test swank-source-locations-name-the-sources
  ;; Recorded as a logical pathname, translated to this tree's lisp/.
  (let ((file (ext:compiled-function-file #'rontolisp:quantize)))
    (is (string= "RONTOLISP:LISP;QUANT;QMATRIX.LISP" file))
    (is (equal (truename (merge-pathnames "lisp/quant/qmatrix.lisp" *root*))
               (probe-file (translate-logical-pathname file))))))

(test swank-source-locations-follow-make-install
  ;; An installed executable points its sources at PREFIX/share/rontolisp/,
  ;; and make uninstall takes back every file make install put there.
  (let ((dest (tmp-path "dest")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (sh "cd \"$1\" && make -s install DESTDIR=\"$2\" PREFIX=/usr/local >/dev/null &&
                  echo '(princ (translate-logical-pathname \"RONTOLISP:LISP;QUANT;QMATRIX.LISP\"))' |
                    \"$2/usr/local/bin/rontolisp\" --norc &&
                  ls \"$2/usr/local/share/man/man1/rontolisp.1\" \"$2/usr/local/lib/rontolisp/rontolisp-prims.fas\" \\
                     \"$2/usr/local/share/rontolisp/rontolisp.asd\" \"$2/usr/local/share/doc/rontolisp/LICENSE\" >/dev/null &&
                  if [ -f build/swank/complete ]; then
                    echo '(progn (princ (command-line::prebuilt-swank-directory)) (rontolisp:exit 0))' |
                      \"$2/usr/local/bin/rontolisp\" --norc 2>/dev/null; echo; fi &&
                  make -s uninstall DESTDIR=\"$2\" PREFIX=/usr/local >/dev/null &&
                  echo --- && find \"$2\" -type f"
                (namestring *root*) dest)
           (is (eql 0 code) "~A" err)
           (is (contains out (format nil "~A/usr/local/share/rontolisp/lisp/quant/qmatrix.lisp" dest)) "~A" out)
           ;; The compiled cl-swank is installed and found by the installed
           ;; executable (when `make' compiled it, cl-swank being installed).
           (when (probe-file (merge-pathnames "build/swank/complete" *root*))
             (is (contains out (format nil "~A/usr/local/lib/rontolisp/swank/" dest)) "~A" out))
           ;; After uninstall no file is left (find prints none).
           (let ((left (search "---" out)))
             (is (and left (string= (format nil "---~%") (subseq out left))) "~A" out)))
      (sh "rm -rf \"$1\"" dest))))

;;; Source locations, backtraces and the inspector as SLIME sees them.

(defun repl-find-definitions (exe &rest env)
  "What cl-swank's FIND-DEFINITIONS answers for RONTOLISP:QUANTIZE in the
executable EXE (its REPL, fed through a pipe, with the environment
assignments ENV), read back; the second value is the REPL's output."
  (multiple-value-bind (code out err)
      (apply #'sh "exe=\"$1\"; shift; env \"$@\" \"$exe\" --norc <<'EOF'
(progn (command-line::load-swank)
       (format t \"~&definitions: ~S~%\"
               (funcall (find-symbol \"FIND-DEFINITIONS\" \"SWANK/BACKEND\") 'rontolisp:quantize))
       (rontolisp:exit 0))
EOF"
             exe (format nil "XDG_CACHE_HOME=~A" (merge-pathnames "build/cache/" *root*))
             env)
    (declare (ignore err))
    (let ((mark (search "definitions: " out)))
      (values (and (eql 0 code) mark
                   (let ((*package* (find-package "RONTOLISP-TESTS")))
                     (ignore-errors (read-from-string out t nil :start (+ mark 13)))))
              out))))

(defun text-at-location (location)
  "The line of text from the position LOCATION (a Swank location, :file
and a 1-based character :position) gives, as Emacs goes there; NIL when
it names no existing file and position."
  (let ((file (second (assoc :file (rest location))))
        (position (second (assoc :position (rest location)))))
    (when (and file position (probe-file file))
      (let ((text (read-file-string file)))
        (when (<= 1 position (length text))
          (subseq text (1- position) (position #\Newline text :start (1- position))))))))

(test swank-finds-definitions-in-the-source-tree
  ;; M-. on rontolisp:quantize: this tree's lisp/quant/qmatrix.lisp, at the
  ;; defun (Emacs counts characters from 1; ECL records bytes).  The file
  ;; was "RONTOLISP:LISP;QUANT;QMATRIX.LISP", which Emacs opened as a new buffer.
  (multiple-value-bind (definitions out) (repl-find-definitions *exe*)
    (is (= 1 (length definitions)) "~A" out)
    (let ((location (second (first definitions))))
      (is (equal (namestring (merge-pathnames "lisp/quant/qmatrix.lisp" *root*))
                 (second (assoc :file (rest location))))
          "~S" location)
      (is (eql 0 (search "(defun quantize (array format" (or (text-at-location location) "")))
          "~S lands on ~S" location (text-at-location location)))))

(test swank-finds-definitions-installed-or-says-missing
  ;; Installed: PREFIX/share/rontolisp/lisp/.  An executable with no
  ;; sources beside it: an error location saying so, not an error and not
  ;; a file Emacs cannot open.
  (let ((dest (tmp-path "dest")) (lone (tmp-path "lone")))
    (unwind-protect
         (progn
           (is (eql 0 (sh "cd \"$1\" && make -s install DESTDIR=\"$2\" PREFIX=/usr/local >/dev/null"
                          (namestring *root*) dest)))
           (let* ((location (second (first (repl-find-definitions
                                            (format nil "~A/usr/local/bin/rontolisp" dest)))))
                  (file (second (assoc :file (rest location)))))
             (is (equal (format nil "~A/usr/local/share/rontolisp/lisp/quant/qmatrix.lisp" dest) file)
                 "~S" location)
             (is (eql 0 (search "(defun quantize (array format" (or (text-at-location location) "")))
                 "~S" location))
           ;; The executable alone, with the compiled cl-swank beside it.
           (is (eql 0 (sh "mkdir -p \"$1/bin\" && cp \"$0\" \"$1/bin/\" &&
                           if [ -d \"$2/build/swank\" ]; then ln -s \"$2/build/swank\" \"$1/bin/swank\"; fi"
                          lone (namestring *root*))))
           (multiple-value-bind (definitions out)
               (repl-find-definitions (format nil "~A/bin/rontolisp" lone))
             (let ((location (second (first definitions))))
               (is (eq :error (first location)) "~S ~A" definitions out)
               (is (contains (or (second location) "") "RONTOLISP:LISP;QUANT;QMATRIX.LISP is not installed")
                   "~S" location))))
      (sh "rm -rf \"$1\" \"$2\"" dest lone))))

(defun swank-exchange (request message)
  "Send the string REQUEST (an :emacs-rex of id 1) to a new server and
answer the first message back that contains MESSAGE (\"\" when none
came within 60 s)."
  (or (call-with-swank-port
       (lambda (port deadline)
         (let ((s (swank-connect port)))
           (unwind-protect
                (progn (swank-send s request)
                       (swank-message-with s message deadline))
             (ignore-errors (close s))))))
      ""))

(test swank-backtraces-name-frames
  ;; An error in RONTOLISP:QUANTIZE: SLIME's backtrace has a frame naming
  ;; it (ECL kept none for the compiled code) and one showing the form
  ;; evaluated (it was #<bytecompiled-function BYTECODES>).
  (let ((debug (swank-exchange "(:emacs-rex (swank:interactive-eval \"(rontolisp:quantize (make-array 3 :element-type 'single-float) :q8-0)\") \"RONTOLISP-USER\" t 1)"
                               "(:debug ")))
    (is (contains debug "\"RONTOLISP:QUANTIZE\"") "~A" debug)
    (is (contains debug "\"RONTOLISP:SHAPE-ERROR\"") "~A" debug)
    (is (contains debug "(EVAL (RONTOLISP:QUANTIZE (MAKE-ARRAY 3") "~A" debug)
    (is (not (contains debug "BYTECODES")) "~A" debug)))

(test swank-inspects-quantized-matrices
  ;; The inspector shows a quantized matrix's format, shape, size and
  ;; first rows (it said "Don't know how to inspect").
  (let ((inspector (swank-exchange "(:emacs-rex (swank:init-inspector \"(rontolisp:quantize (make-array '(6 32) :element-type 'single-float :initial-element 0.5) :q8-0)\") \"RONTOLISP-USER\" t 1)"
                                   "(:return ")))
    (is (not (contains inspector "Don't know how to inspect")) "~A" inspector)
    (dolist (part '("\"Format: \" \"q8-0" "\"Shape: \" (:value \"(6 32)\"" "\"Bytes: \" \"204\""
                    "The first 4 rows of 6" "0: 0.49996948 0.49996948"))
      (is (contains inspector part) "~S not in ~A" part inspector))))

(defun inspector-text (object)
  "The text SLIME's inspector shows of OBJECT (our view of it): strings
as they are, (:value X) as X printed, (:newline) a newline."
  (with-output-to-string (s)
    (dolist (part (command-line::swank-inspector-content object))
      (cond ((stringp part) (write-string part s))
            ((eq :newline (first part)) (terpri s))
            ((eq :value (first part)) (princ (or (third part) (second part)) s))))))

(test swank-inspector-views
  ;; Float16 and bfloat16 arrays: format, shape, bytes, the first rows
  ;; widened; a rank-1 quantized matrix (127 has the scale 1: exact); an
  ;; encoder's file and parameters.
  (let ((a (make-array '(5 10) :element-type 'single-float)))
    (dotimes (i 50) (setf (row-major-aref a i) (/ i 4.0)))
    (let ((f16 (inspector-text (rontolisp:make-float16-array a)))
          (bf16 (inspector-text (rontolisp:make-bfloat16-array a)))
          (q (inspector-text (rontolisp:quantize (make-array 64 :element-type 'single-float
                                                                :initial-element 127.0)
                                                 :q8-0))))
      (dolist (part '("Format: float16" "Shape: (5 10)" "Values: 50" "Bytes: 100"
                      "The first 4 rows of 5" "  0: 0.0 0.25 0.5 0.75 1.0 1.25 1.5 1.75 ..."
                      "  3: 7.5 7.75 8.0"))
        (is (contains f16 part) "~S not in ~A" part f16))
      (is (contains bf16 "Format: bfloat16") "~A" bf16)
      (is (contains bf16 "  1: 2.5 2.75 3.0") "~A" bf16)
      (dolist (part '("Format: q8-0" "Shape: (64)" "Bytes: 68" "The first 1 row of 1"
                      "  0: 127.0 127.0"))
        (is (contains q part) "~S not in ~A" part q))))
  (let ((e (inspector-text (model:load (command-line::random-model "s1-pico" :type :f32
                                                                          :encoder-only t)))))
    (dolist (part '("Hyper-parameters:" "  layers: 2" "  embedding-length: 64" "Token embedding: "))
      (is (contains e part) "~S not in ~A" part e))))

(test slime-edits-definitions-inspects-and-debugs
  ;; Debian's SLIME in Emacs (tests/ref/slime-rontolisp.el): M-. on
  ;; rontolisp:quantize opens lisp/quant/qmatrix.lisp at its defun, the
  ;; inspector shows a quantized matrix, the debugger names the function
  ;; and `v' on its frame finds the defun too.
  (let ((script (merge-pathnames "tests/ref/slime-rontolisp.el" *root*)))
    (cond
      ((not (eql 0 (sh "command -v emacs >/dev/null && ls -d /usr/share/emacs/site-lisp/elpa/slime-* >/dev/null 2>&1")))
       (skip-reference "emacs or SLIME is missing (apt-get install emacs-nox slime)"))
      (t
       (let ((lines '()))
         (call-with-swank-server
          '() (lambda (port out err)
                (declare (ignore err))
                (is (integerp port) "no port announced in ~S" out)
                (when port
                  (multiple-value-bind (code out err)
                      ;; A HOME of its own: SLIME saves its history there.
                      (sh "mkdir \"$3\" && HOME=\"$3\" timeout -s KILL 120 emacs --batch -Q -l \"$1\" \"$2\"
                           status=$?; rm -rf \"$3\"; exit $status"
                          (namestring script) (princ-to-string port) (tmp-path "home"))
                    (is (eql 0 code) "emacs ended ~S: ~A~A" code out err)
                    (setf lines (split-lines out))))))
         (flet ((fact (name)
                  (let ((line (find-if (lambda (l) (eql 0 (search name l))) lines)))
                    (and line (subseq line (length name))))))
           (is (equal (namestring (merge-pathnames "lisp/quant/qmatrix.lisp" *root*))
                      (fact "definition-file: "))
               "~{~A~%~}" lines)
           (is (eql 0 (search "(defun quantize (array format" (or (fact "definition-line: ") "")))
               "~{~A~%~}" lines)
           (let ((view (or (fact "inspector: ") "")))
             (dolist (part '("Format: q8-0" "Shape: (4 32)" "Bytes: 136" "The first 4 rows of 4"))
               (is (contains view part) "~S not in ~S" part view)))
           (let ((frames (remove-if-not (lambda (l) (eql 0 (search "frame: " l))) lines)))
             (is (find-if (lambda (l) (search ": RONTOLISP:QUANTIZE" l)) frames) "~{~A~%~}" frames)
             (is (notany (lambda (l) (search "BYTECODES" l)) frames) "~{~A~%~}" frames))
           (is (eql 0 (search "(defun quantize (array format" (or (fact "frame-source-line: ") "")))
               "~{~A~%~}" lines)
           (is (equal "slime-done" (car (last lines))) "~{~A~%~}" lines)))))))
