;;;; test-swank.lisp - `rontolisp swank': a server on 127.0.0.1 answers a
;;;; minimal Swank request and is stopped; it refuses other interfaces;
;;;; compiled functions name their sources through the RONTOLISP host.

(in-package "RONTOLISP-TESTS")

(def-suite swank :in all :description "The Swank server and source locations.")
(in-suite swank)

(defun wait-for-line (path pattern deadline)
  "The first line of the file PATH that contains PATTERN, waiting for it
until the internal real time DEADLINE; NIL when it never came."
  (loop
    (let ((line (ignore-errors
                 (with-open-file (s path)
                   (loop for l = (read-line s nil) while l
                         when (search pattern l) return l)))))
      (when line (return line))
      (when (> (get-internal-real-time) deadline) (return nil))
      (sleep 0.2))))

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

(test swank-answers-on-loopback-and-stops
  (require 'sockets)
  (let* ((out (tmp-path "swank-out"))
         (info "") (answer "")
         ;; The first start compiles cl-swank into the ASDF cache.
         (deadline (+ (get-internal-real-time) (* 240 internal-time-units-per-second)))
         (process (nth-value 2 (ext:run-program *exe* '("swank" "--port" "0")
                                                :input nil :output out :error nil
                                                :if-output-exists :supersede :wait nil))))
    (unwind-protect
         (let* ((line (wait-for-line out "Swank listening on 127.0.0.1 port " deadline))
                (port (and line (parse-integer line :start (1+ (position #\Space line :from-end t))))))
           (is (integerp port) "no port announced in ~S" (ignore-errors (read-file-string out)))
           (when port
             (let ((socket (make-instance (find-symbol "INET-SOCKET" "SB-BSD-SOCKETS")
                                          :type :stream :protocol :tcp))
                   (deadline (+ (get-internal-real-time) (* 30 internal-time-units-per-second))))
               (funcall (find-symbol "SOCKET-CONNECT" "SB-BSD-SOCKETS") socket #(127 0 0 1) port)
               (let ((s (funcall (find-symbol "SOCKET-MAKE-STREAM" "SB-BSD-SOCKETS") socket
                                 :input t :output t :buffering :full :element-type 'character)))
                 (swank-send s "(:emacs-rex (swank:connection-info) nil t 1)")
                 (setf info (or (swank-reply s 1 deadline) ""))
                 (swank-send s "(:emacs-rex (swank:eval-and-grab-output \"(package-name *package*)\") nil t 2)")
                 (setf answer (or (swank-reply s 2 deadline) ""))
                 (ignore-errors (close s))))))
      (ext:run-program "kill" (list "-TERM" (princ-to-string (ext:external-process-pid process)))
                       :output nil :error nil)
      (multiple-value-bind (how code) (ext:external-process-wait process t)
        (is (eq :exited how))
        (is (eql 143 code)))
      (ignore-errors (delete-file out)))
    (is (contains info "(:return (:ok (:pid") "connection-info answered ~S" info)
    (is (contains info "RONTOLISP-USER"))
    (is (contains answer "\\\"RONTOLISP-USER\\\"") "eval answered ~S" answer)))

(test swank-refuses-other-interfaces
  (multiple-value-bind (code out err) (run-exe '("swank" "--interface" "0.0.0.0"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "loopback")))
  (is (rontolisp::loopback-address-p "127.0.0.1"))
  (is (rontolisp::loopback-address-p "::1"))
  (is (not (rontolisp::loopback-address-p "127.0.0")))
  (is (not (rontolisp::loopback-address-p "10.0.0.1"))))

(test swank-source-locations-name-the-sources
  ;; Recorded as a logical pathname, translated to this tree's lisp/.
  (let ((file (ext:compiled-function-file #'rontolisp:quantize)))
    (is (string= "RONTOLISP:LISP;QMATRIX.LISP" file))
    (is (equal (truename (merge-pathnames "lisp/qmatrix.lisp" *root*))
               (probe-file (translate-logical-pathname file))))))

(test swank-source-locations-follow-make-install
  ;; An installed executable points its sources at PREFIX/share/rontolisp/,
  ;; and make uninstall takes back every file make install put there.
  (let ((dest (tmp-path "dest")))
    (unwind-protect
         (multiple-value-bind (code out err)
             (sh "cd \"$1\" && make -s install DESTDIR=\"$2\" PREFIX=/usr/local >/dev/null &&
                  echo '(princ (translate-logical-pathname \"RONTOLISP:LISP;QMATRIX.LISP\"))' |
                    \"$2/usr/local/bin/rontolisp\" --norc &&
                  ls \"$2/usr/local/share/man/man1/rontolisp.1\" \"$2/usr/local/lib/rontolisp/rontolisp-prims.fas\" \\
                     \"$2/usr/local/share/rontolisp/rontolisp.asd\" \"$2/usr/local/share/doc/rontolisp/LICENSE\" >/dev/null &&
                  make -s uninstall DESTDIR=\"$2\" PREFIX=/usr/local >/dev/null &&
                  echo --- && find \"$2\" -type f"
                (namestring *root*) dest)
           (is (eql 0 code) "~A" err)
           (is (contains out (format nil "~A/usr/local/share/rontolisp/lisp/qmatrix.lisp" dest)) "~A" out)
           ;; After uninstall no file is left (find prints none).
           (let ((left (search "---" out)))
             (is (and left (string= (format nil "---~%") (subseq out left))) "~A" out)))
      (sh "rm -rf \"$1\"" dest))))
