;;;; swank.lisp - `rontolisp swank': a Swank server for SLIME and Sly on a
;;;; loopback address, with Debian's cl-swank loaded through ASDF.  `make'
;;;; compiles cl-swank beside the executable (BUILD-SWANK-FASLS; `make
;;;; install' copies them), so a start takes a second; without them the
;;;; first start compiles it into the ASDF cache (about a minute).  Its
;;;; threads start in RONTOLISP-USER, and M-. finds the Lisp sources
;;;; through the RONTOLISP logical host (see INSTALL-SOURCE-TRANSLATIONS).
;;;; Backtraces name our functions and the inspector shows our objects
;;;; (SWANK-PRINT-FRAME, SWANK-INSPECTOR-CONTENT).
;;;;
;;;; The listening socket is ours (prims/ecl/net.c), not the one Swank's
;;;; ECL backend makes with sb-bsd-sockets: that one looks "tcp" up in
;;;; /etc/protocols (absent from a minimal system), resolves the interface
;;;; with gethostbyname (which reads 0127.0.0.1 as octal, 87.0.0.1) and
;;;; knows no IPv6.  The address is read once, as inet_pton(3) reads it,
;;;; checked to be loopback and bound as read, before cl-swank loads.
;;;; Connections beyond *SWANK-CONNECTION-LIMIT* are told so and closed; a
;;;; connection that closes takes its evaluations with it.

(in-package "COMMAND-LINE")

(defparameter *swank-connection-limit* 32
  "The most Swank connections open at once; one more is sent a message
saying so and closed (each connection takes four or five Lisp threads).")

(defvar *swank-streams* '()
  "The streams of the Swank connections accepted and not yet closed.")

;;; Addresses.

(defun parse-address (text)
  "The address TEXT as inet_pton(3) reads it: a vector of 4 octets (IPv4,
dotted decimal without leading zeros) or 16 (IPv6), or NIL; \"localhost\"
reads as 127.0.0.1."
  (if (string-equal text "localhost")
      (coerce #(127 0 0 1) '(vector (unsigned-byte 8)))
      (%inet-pton (%utf8-octets text))))

(defun loopback-octets-p (octets)
  "True when OCTETS (as PARSE-ADDRESS answers) is 127.0.0.0/8 or ::1."
  (if (= 4 (length octets))
      (= 127 (aref octets 0))
      (and (= 1 (aref octets 15)) (every #'zerop (subseq octets 0 15)))))

(defun loopback-address-p (address)
  "True when the string ADDRESS names the loopback interface: an IPv4
address in 127.0.0.0/8, ::1 or localhost, written as inet_pton(3) reads it."
  (let ((octets (parse-address address)))
    (and octets (loopback-octets-p octets))))

(defun loopback-address (address)
  "The octets of the loopback address ADDRESS (see LOOPBACK-ADDRESS-P);
signals USAGE-ERROR naming ADDRESS when it is not one."
  (let ((octets (parse-address address)))
    (unless (and octets (loopback-octets-p octets))
      (usage-error "--interface expects a loopback address (127.0.0.0/8 in dotted decimal, ::1 or localhost), found ~S"
                   address))
    octets))

;;; Loading cl-swank, compiled at build time when it can be.

(defun swank-system-directory ()
  "The directory of Debian's cl-swank sources (ASDF system SWANK), loading
ASDF first; signals RONTOLISP-ERROR naming the package when it is absent."
  (let ((*load-verbose* nil))
    (require "asdf"))
  (let ((system (let ((*load-verbose* nil))
                  (funcall (find-symbol "FIND-SYSTEM" "ASDF") "swank" nil))))
    (unless system
      (rontolisp-error 'swank "expected the ASDF system swank (Debian package cl-swank), found none"))
    (funcall (find-symbol "SYSTEM-SOURCE-DIRECTORY" "ASDF") system)))

(defun translate-swank-fasls (directory)
  "Make ASDF (and so cl-swank's loader) put and find the compiled files of
cl-swank's sources under DIRECTORY; other files keep ASDF's configuration."
  (funcall (find-symbol "INITIALIZE-OUTPUT-TRANSLATIONS" "ASDF")
           `(:output-translations
             (,(namestring (swank-system-directory)) ,(namestring directory))
             :inherit-configuration)))

(defun prebuilt-swank-directory ()
  "The directory of the cl-swank files `make' compiled for this executable
(build/swank/ beside build/rontolisp, PREFIX/lib/rontolisp/swank/ once
installed), when it holds them all (its file `complete') and no cl-swank
source is newer; else NIL."
  (let ((exe (ignore-errors (truename "/proc/self/exe"))))
    (when exe
      (let ((bin (make-pathname :name nil :type nil :version nil :defaults exe))
            (sources (directory (merge-pathnames "**/*.lisp" (swank-system-directory)))))
        (loop for up in '("swank/" "../lib/rontolisp/swank/")
              for dir = (ignore-errors (truename (merge-pathnames up bin)))
              for stamp = (and dir (probe-file (merge-pathnames "complete" dir)))
              when (and stamp
                        (let ((built (file-write-date stamp)))
                          (every (lambda (s) (<= (or (file-write-date s) 0) built)) sources)))
                return dir)))))

(defun load-swank-system ()
  "Load the ASDF system SWANK (which compiles what is not compiled yet and
cl-swank's contribs with it), its compiler chatter muffled."
  (let ((*standard-output* (make-broadcast-stream))
        (*compile-verbose* nil) (*compile-print* nil)
        (*load-verbose* nil))
    (handler-bind ((warning #'muffle-warning))
      (funcall (find-symbol "LOAD-SYSTEM" "ASDF") "swank"))))

(defun load-swank ()
  "Load Debian's cl-swank (system SWANK) unless it is loaded already, from
the files `make' compiled when they are there and current, else through
the ASDF cache (compiling it the first time).  Signals RONTOLISP-ERROR
naming the package to install when it is absent."
  (unless (find-package "SWANK")
    (let ((prebuilt (prebuilt-swank-directory)))
      (cond (prebuilt (translate-swank-fasls prebuilt))
            (t (format *error-output* "~&; loading Swank (the first time compiles it)~%")
               (finish-output *error-output*))))
    (load-swank-system))
  (install-swank-backend))

(defun build-swank-fasls (directory)
  "Compile cl-swank and its contribs into DIRECTORY (what `make' does, for
PREBUILT-SWANK-DIRECTORY) and mark it complete; when cl-swank is not
installed, say so on standard error and compile nothing."
  (let ((directory (merge-pathnames directory (truename "./"))))
    (when (find-package "SWANK")
      (rontolisp-error 'swank "expected a process without Swank loaded, found it loaded"))
    (unless (ignore-errors (swank-system-directory))
      (format *error-output* "~&rontolisp: cl-swank is not installed: nothing compiled for `rontolisp swank' (once it is, its first start compiles it)~%")
      (return-from build-swank-fasls nil))
    (ensure-directories-exist directory)
    (translate-swank-fasls directory)
    (load-swank-system)
    (with-open-file (s (merge-pathnames "complete" directory) :direction :output
                                                              :if-exists :supersede)
      (format s "cl-swank compiled for ~A ~A~%" (lisp-implementation-type)
              (lisp-implementation-version)))
    directory))

;;; Source locations.  ECL records where each compiled function's form
;;; starts as a byte offset just past the previous top-level form, in the
;;; file RONTOLISP:LISP;FOLDER;NAME.LISP (see INSTALL-SOURCE-TRANSLATIONS); Emacs
;;; counts characters from 1.

(defun rontolisp-source-p (file)
  "True when FILE (a pathname or namestring) is a RONTOLISP logical pathname."
  (let ((path (ignore-errors (pathname file))))
    (and (typep path 'logical-pathname)
         (string-equal "RONTOLISP" (pathname-host path)))))

(defun form-start-character (octets position)
  "The character index, in the UTF-8 text OCTETS, of the form that starts
at or after the byte POSITION once blanks and ; comments are skipped."
  (let ((i (min (max position 0) (length octets))))
    (loop while (< i (length octets))
          do (case (code-char (aref octets i))
               ((#\Space #\Tab #\Newline #\Return #\Page) (incf i))
               (#\; (setf i (or (position 10 octets :start i) (length octets))))
               (t (loop-finish))))
    (count-if (lambda (b) (/= #x80 (logand b #xC0))) octets :end i)))

(defun source-file-location (file position)
  "Swank's location of the definition ECL recorded at the byte POSITION of
FILE (a RONTOLISP logical pathname): the existing physical file and the
character where the form starts, or an error location saying which file is
missing when the sources are not where the executable looks for them."
  (let* ((physical (ignore-errors (translate-logical-pathname file)))
         (found (and physical (ignore-errors (probe-file physical)))))
    (if found
        `(:location (:file ,(namestring found))
                    (:position ,(1+ (form-start-character
                                     (read-file-octets found :what "a Lisp source file")
                                     position)))
                    (:align t))
        `(:error ,(if physical
                      (format nil "The source file ~A is not installed (looked for ~A)"
                              (namestring file) (namestring physical))
                      (format nil "The source file ~A is not installed (neither PREFIX/share/rontolisp/lisp/ nor a source tree is beside the executable)"
                              (namestring file)))))))

(defun rontolisp-definition (name)
  "The definition ECL recorded of NAME in RONTOLISP's sources, as (DSPEC
FILE . POSITION), or NIL."
  (and name (symbolp name)
       (find-if (lambda (a) (rontolisp-source-p (second a)))
                (ext:get-annotation name 'si::location :all))))

(defun swank-find-definitions (find-definitions)
  "Swank's FIND-DEFINITIONS around FIND-DEFINITIONS (the backend's own): the
definitions ECL recorded in RONTOLISP's sources are located by
SOURCE-FILE-LOCATION, in the physical file with Emacs' positions, or told
missing rather than named by a logical pathname Emacs cannot open; other
names are the backend's."
  (lambda (name)
    (let ((annotations (ext:get-annotation name 'si::location :all)))
      (if (some (lambda (a) (rontolisp-source-p (second a))) annotations)
          (loop for (dspec file . position) in annotations
                collect (list dspec (if (rontolisp-source-p file)
                                        (source-file-location file position)
                                        (funcall (swank-symbol "MAKE-FILE-LOCATION" "SWANK/ECL")
                                                 file position))))
          (funcall find-definitions name)))))

;;; What SLIME's inspector shows of our objects (cl-swank's own view of a
;;; structure lists its slots, whose BASE holds every packed byte).

(defparameter *inspector-rows* 4
  "How many rows of a quantized matrix or 16-bit float array the inspector
shows, dequantized.")

(defparameter *inspector-row-values* 8
  "How many values of each row shown the inspector prints.")

(defun inspector-tensor-content (kind dims bytes value)
  "Swank inspector content for a tensor in format KIND (a string) of
dimensions DIMS stored in BYTES bytes: its shape, size and the first
*INSPECTOR-ROWS* rows (the first *INSPECTOR-ROW-VALUES* values of each)
with the single-floats (VALUE ROW COLUMN) answers, plus those rows whole as
an inspectable single-float array."
  (let* ((rows (if (= 2 (length dims)) (first dims) 1))
         (cols (car (last dims)))
         (shown (min rows *inspector-rows*))
         (head (make-array (list shown cols) :element-type 'single-float)))
    (dotimes (r shown)
      (dotimes (c cols)
        (setf (aref head r c) (funcall value r c))))
    `("Format: " ,kind (:newline)
      "Shape: " (:value ,dims) (:newline)
      "Values: " ,(princ-to-string (* rows cols)) (:newline)
      "Bytes: " ,(princ-to-string bytes) (:newline)
      (:newline)
      ,(format nil "The first ~D row~:P of ~D, as single-floats: " shown rows)
      (:value ,head "[inspect them]") (:newline)
      ,@(loop for r below shown
              append `(,(format nil "  ~D: ~{~S~^ ~}~:[~; ...~]" r
                                (loop for c below (min cols *inspector-row-values*)
                                      collect (aref head r c))
                                (> cols *inspector-row-values*))
                       (:newline))))))

(defun swank-inspector-content (object)
  "What SLIME's inspector shows of OBJECT: a quantized matrix or float16 /
bfloat16 array as INSPECTOR-TENSOR-CONTENT, an encoder's file, hyper-
parameters and tokenizer, a tokenizer's file and vocabulary size."
  (etypecase object
    (quantized-matrix
     (let ((dims (array-dimensions object)))
       (inspector-tensor-content
        (format nil "~(~A~) (~A)" (array-element-type object)
                (if (q8-0-matrix-p object)
                    "blocks of 32 values, one f16 scale each"
                    (format-description (array-element-type object))))
        dims (qm-byte-size object)
        (lambda (r c) (coerce (if (= 2 (length dims)) (aref object r c) (aref object c))
                              'single-float)))))
    ((or float16-array bfloat16-array)
     (let* ((bits (half-array-bits object))
            (dims (array-dimensions bits))
            (one (make-array 1 :element-type '(unsigned-byte 16)))
            (widened (make-array 1 :element-type 'single-float)))
       (inspector-tensor-content
        (if (float16-array-p object) "float16 (IEEE binary16)" "bfloat16")
        dims (* 2 (array-total-size bits))
        (lambda (r c)
          (setf (aref one 0) (row-major-aref bits (+ (* r (car (last dims))) c)))
          (%half-to-single-into one (bfloat16-array-p object) widened)
          (aref widened 0)))))
    (model:encoder
     `("File: " (:value ,(encoder-path object)) (:newline)
       "Tokenizer: " (:value ,(encoder-tokenizer object)) (:newline)
       "Hyper-parameters:" (:newline)
       ,@(loop for (key value) on (model:hyperparameters object) by #'cddr
               append `(,(format nil "  ~(~A~): " key) (:value ,value) (:newline)))
       "Token embedding: " (:value ,(encoder-token-embedding object)) (:newline)
       "Layers: " (:value ,(encoder-layers object)) (:newline)))
    (model:tokenizer
     `("File: " (:value ,(tokenizer-path object)) (:newline)
       "Tokens: " ,(princ-to-string (model:vocabulary-size object)) (:newline)))))

(defun install-swank-inspectors ()
  "Give cl-swank's EMACS-INSPECT a method answering SWANK-INSPECTOR-CONTENT
for each of our objects it shows."
  (let ((inspect (swank-symbol "EMACS-INSPECT" "SWANK/BACKEND")))
    (dolist (class '(quantized-matrix float16-array bfloat16-array model:encoder model:tokenizer))
      (eval `(defmethod ,inspect ((object ,class))
               (swank-inspector-content object))))))

;;; Backtraces.  A frame of cl-swank's ECL backend is (FUNCTION ENV TAGS),
;;; FUNCTION what ECL's history stack holds: the name of a compiled
;;; function (the image's are compiled to push one, see
;;; runtime/build-lisp.lisp; an anonymous lambda has a made-up name such
;;; as LAMBDA1173), or a bytecode function -- named for a function defined
;;; at the REPL, SI:BYTECODES for a form being evaluated.  ECL keeps the
;;; source of bytecode, so such a frame can show the form.

(defun swank-print-frame (frame stream)
  "Swank's PRINT-FRAME for ECL: the name of FRAME's function; for
bytecode without a name, the form it evaluates as (EVAL FORM) or its
LAMBDA, abbreviated to one line."
  (let* ((fun (first frame))
         (name (if (functionp fun) (si::compiled-function-name fun) fun)))
    (if (and name (not (eq name 'si::bytecodes)))
        (prin1 name stream)
        (let ((form (and (functionp fun) (ignore-errors (function-lambda-expression fun))))
              (*print-pretty* nil) (*print-level* 4) (*print-length* 6))
          (cond ((null form) (prin1 fun stream))
                ((eq name 'si::bytecodes) (format stream "(EVAL ~S)" form))
                (t (prin1 form stream)))))))

(defun swank-frame-source-location (frame-source-location)
  "Swank's FRAME-SOURCE-LOCATION around FRAME-SOURCE-LOCATION (the
backend's own, which finds only bytecode): a frame of a function defined in
RONTOLISP's sources is located at its definition (SOURCE-FILE-LOCATION)."
  (lambda (index)
    (let* ((frame (ignore-errors
                   (elt (symbol-value (swank-symbol "*BACKTRACE*" "SWANK/ECL")) index)))
           (definition (and frame (rontolisp-definition (first frame)))))
      (if definition
          (source-file-location (second definition) (cddr definition))
          (funcall frame-source-location index)))))

;;; The backend functions replaced: the listening socket and its port, the
;;; limit on connections, source locations and how frames print.

(defun swank-symbol (name package)
  "The symbol NAME of cl-swank's PACKAGE (loaded at run time)."
  (or (find-symbol name package)
      (rontolisp-error 'swank "expected ~A::~A in cl-swank, found none" package name)))

(defvar *swank-bound-socket* nil
  "The descriptor of the socket START-SWANK bound before loading cl-swank,
until SWANK-CREATE-SOCKET hands it to cl-swank.")

(defun swank-listen (host port &optional (backlog 16))
  "The descriptor of a socket listening on the loopback address HOST (see
LOOPBACK-ADDRESS) and PORT, made by %TCP-LISTEN (no protocol lookup);
signals RONTOLISP-ERROR saying why when it cannot be (a port in use)."
  (let ((octets (loopback-address host)))
    (multiple-value-bind (fd message) (%tcp-listen octets port backlog)
      (unless fd
        (rontolisp-error 'swank "expected to listen on ~A port ~D, found ~A" host port message))
      fd)))

(defun swank-create-socket (host port &key backlog)
  "Swank's CREATE-SOCKET: the socket START-SWANK bound (*SWANK-BOUND-SOCKET*),
else a new one (SWANK-LISTEN) on HOST and PORT, wrapped as an
sb-bsd-sockets INET-SOCKET, whose accept Swank calls."
  (let ((fd (or (shiftf *swank-bound-socket* nil) (swank-listen host port (or backlog 16)))))
    (make-instance (swank-symbol "INET-SOCKET" "SB-BSD-SOCKETS") :descriptor fd :protocol 0)))

(defun swank-local-port (socket)
  "Swank's LOCAL-PORT: the port SOCKET listens on (IPv4 or IPv6)."
  (%tcp-local-port (funcall (swank-symbol "SOCKET-FILE-DESCRIPTOR" "SB-BSD-SOCKETS") socket)))

(defun refuse-swank-connection (stream open)
  "Tell the client of STREAM (a new connection) and standard error that it
is refused, OPEN connections being the limit, and close it."
  (let ((message (format nil "rontolisp swank: connection refused: expected fewer than ~D open connections (*swank-connection-limit*), found ~D"
                         *swank-connection-limit* open)))
    (format *error-output* "~&~A~%" message)
    (finish-output *error-output*)
    (ignore-errors
     (funcall (swank-symbol "WRITE-MESSAGE" "SWANK/RPC")
              `(:background-message ,message) (find-package "RONTOLISP-USER") stream))
    (ignore-errors (close stream))))

(defun limit-swank-connections (accept)
  "Swank's ACCEPT-CONNECTION around ACCEPT (the backend's own): a new
connection beyond *SWANK-CONNECTION-LIMIT* open ones is refused
(REFUSE-SWANK-CONNECTION) and the next one awaited."
  (lambda (socket &rest options)
    (loop
      (let ((stream (apply accept socket options)))
        (setf *swank-streams* (remove-if-not #'open-stream-p *swank-streams*))
        (let ((open (length *swank-streams*)))
          (cond ((< open *swank-connection-limit*)
                 (push stream *swank-streams*)
                 (return stream))
                (t (refuse-swank-connection stream open))))))))

(defun end-connection-threads (connection)
  "Swank's *CONNECTION-CLOSED-HOOK*: end the threads still evaluating a
request of CONNECTION, which has closed.  cl-swank ends the threads that
serve a connection (reader, control, REPL) but not its workers: an
evaluation whose client had gone ran on, holding its memory."
  (when (typep connection (swank-symbol "MULTITHREADED-CONNECTION" "SWANK"))
    (dolist (thread (funcall (swank-symbol "MCONN.ACTIVE-THREADS" "SWANK") connection))
      (when (and (not (eq thread mp:*current-process*)) (mp:process-active-p thread))
        (ignore-errors (mp:process-kill thread))))))

(defvar *swank-backend-installed* nil
  "True once INSTALL-SWANK-BACKEND has replaced cl-swank's functions.")

(defun install-swank-backend ()
  "Replace the implementations of cl-swank's CREATE-SOCKET, LOCAL-PORT,
ACCEPT-CONNECTION, FIND-DEFINITIONS, FRAME-SOURCE-LOCATION and PRINT-FRAME
(once) by SWANK-CREATE-SOCKET, SWANK-LOCAL-PORT, LIMIT-SWANK-CONNECTIONS,
SWANK-FIND-DEFINITIONS and SWANK-FRAME-SOURCE-LOCATION around the
backend's own, and SWANK-PRINT-FRAME; add END-CONNECTION-THREADS to
the hooks run when a connection closes and our inspector views
(INSTALL-SWANK-INSPECTORS)."
  (unless *swank-backend-installed*
    (let ((impl (swank-symbol "IMPLEMENTATION" "SWANK/BACKEND")))
      (flet ((backend (name) (swank-symbol name "SWANK/BACKEND")))
        (setf (get (backend "CREATE-SOCKET") impl) #'swank-create-socket
              (get (backend "LOCAL-PORT") impl) #'swank-local-port
              (get (backend "ACCEPT-CONNECTION") impl)
              (limit-swank-connections (get (backend "ACCEPT-CONNECTION") impl))
              (get (backend "FIND-DEFINITIONS") impl)
              (swank-find-definitions (get (backend "FIND-DEFINITIONS") impl))
              (get (backend "FRAME-SOURCE-LOCATION") impl)
              (swank-frame-source-location (get (backend "FRAME-SOURCE-LOCATION") impl))
              (get (backend "PRINT-FRAME") impl) #'swank-print-frame)))
    (push 'end-connection-threads
          (symbol-value (swank-symbol "*CONNECTION-CLOSED-HOOK*" "SWANK")))
    (install-swank-inspectors)
    (setf *swank-backend-installed* t)))

(defun start-swank (&key (port 4005) (interface "127.0.0.1"))
  "Start a Swank server on INTERFACE (a loopback address) and PORT (0: a
free one) whose threads start in package RONTOLISP-USER; answers the
port it listens on.  The port is bound before cl-swank loads, so a port
in use is told at once, whatever loading takes."
  (setf *swank-bound-socket* (swank-listen interface port))
  (load-swank)
  ;; Swank reads its messages under WITH-STANDARD-IO-SYNTAX: bounded, a
  ;; deeply nested message is a reader error sent back, not a crash.
  (bound-standard-readtable)
  (let ((user (find-package "RONTOLISP-USER")))
    ;; SETF, not LET: the server's threads see global values.
    (setf *package* user
          *readtable* (depth-limited-readtable))
    (setf (symbol-value (find-symbol "*DEFAULT-WORKER-THREAD-BINDINGS*" "SWANK"))
          (list (cons '*package* user) (cons '*readtable* *readtable*)))
    (funcall (find-symbol "CREATE-SERVER" "SWANK")
             :port port :interface interface :dont-close t)))
