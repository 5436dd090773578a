;;;; test-serve.lisp - `rontolisp serve' (lisp/jobs/serve.lisp, prims/http.c)
;;;; in a child process on a free loopback port: llama-server's shapes,
;;;; checked against llama-server itself (tests/build-llama-server.sh), the
;;;; numbers of `tokenize', `embed --json' and `decide --json' bit for bit,
;;;; the API key, abuse that must not stop it, and SIGINT/SIGTERM ending it
;;;; with status 0.

(in-package "RONTOLISP-TESTS")

(def-suite serve :in all :description "The HTTP server.")
(in-suite serve)

;;; A server in a child process.

(defvar *server-process* nil
  "While CALL-WITH-SERVER's function runs, the server's child process.")

(defun announced-port (out err what)
  "The port a server (WHAT names it) announces in the file OUT as
\"listening on http://127.0.0.1:PORT\", waiting at most 60 s; an error
quoting its standard error (the file ERR) when none came."
  (let* ((deadline (+ (get-internal-real-time) (* 60 internal-time-units-per-second)))
         (line (wait-for-line out "listening on http://127.0.0.1:" deadline))
         (port (and line (parse-integer line :start (1+ (position #\: line :from-end t))
                                             :junk-allowed t))))
    (or port
        (error "~A announced no port within 60 s: ~A" what
               (ignore-errors (read-file-string err))))))

(defun call-with-server (args function)
  "Run `rontolisp serve --port 0 ARGS', call FUNCTION with the port it
announces on its first line (the test fails when none came within 60 s),
*SERVER-PROCESS* bound to the server, then stop it with SIGTERM; answer
FUNCTION's value and the server's exit status (NIL when a signal ended
it), its standard error as a third value."
  (let* ((out (tmp-path "serve-out")) (err (tmp-path "serve-err"))
         (process (run-child *exe* (append (list "serve") args (list "--port" "0"))
                             :input nil :output out :error err :if-output-exists :supersede
                             :if-error-exists :supersede :wait nil))
         (value nil) (code nil) (log ""))
    (unwind-protect
         (let ((port (announced-port out err "serve")))
           (setf value (let ((*server-process* process)) (funcall function port)))
           (signal-process process 15)
           (multiple-value-bind (how status)
               (wait-child process :deadline 30 :what "rontolisp serve after SIGTERM")
             (setf code (and (eq how :exited) status))))
      (end-child process)
      (setf log (or (ignore-errors (read-file-string err)) ""))
      (ignore-errors (delete-file out))
      (ignore-errors (delete-file err)))
    (values value code log)))

(defmacro with-server ((port &rest args) &body body)
  "Run BODY with PORT bound to a server's port (CALL-WITH-SERVER with ARGS),
then check that SIGTERM ended it with status 0."
  (let ((code (gensym)) (log (gensym)))
    `(multiple-value-bind (value ,code ,log) (call-with-server (list ,@args) (lambda (,port) ,@body))
       (is (eql 0 ,code) "serve after SIGTERM: status ~S, stderr ~A" ,code ,log)
       value)))

;;; HTTP over a loopback socket.

(defun crlf-join (lines)
  (format nil "~{~A~C~C~}" (loop for l in lines append (list l #\Return #\Newline))))

(defun call-with-loopback-stream (port function)
  "Call FUNCTION with a Latin-1 character stream (one character a byte) on
a new connection to 127.0.0.1:PORT, closed when FUNCTION returns."
  (require 'sockets)
  (flet ((sym (name) (find-symbol name "SB-BSD-SOCKETS")))
    (let ((socket (make-instance (sym "INET-SOCKET") :type :stream :protocol 6)))
      (funcall (sym "SOCKET-CONNECT") socket #(127 0 0 1) port)
      (let ((s (funcall (sym "SOCKET-MAKE-STREAM") socket :input t :output t :buffering :full
                                                          :element-type 'character
                                                          :external-format :latin-1)))
        (unwind-protect (funcall function s)
          (ignore-errors (close s :abort t)))))))

(defun read-answer (s end &optional (first ""))
  "FIRST, then what comes on the stream S until the server closes the
connection (or resets it) or the internal real time END, and :CLOSED or
:DEADLINE, which of the two ended the wait."
  (let ((how :deadline))
    (values
     (with-output-to-string (out)
       (write-string first out)
       (loop (let ((c (handler-case (read-char-no-hang s nil :eof)
                        (error () :eof))))
               (cond ((or (eq c :eof) (and (null c) (not (open-stream-p s))))
                      (setf how :closed)
                      (return))
                     (c (write-char c out))
                     ((> (get-internal-real-time) end) (return))
                     (t (sleep 0.005))))))
     how)))

(defun deadline-after (seconds)
  (+ (get-internal-real-time) (* seconds internal-time-units-per-second)))

(defun http-raw (port request &key (deadline 30) (close t))
  "Send REQUEST (a string of Latin-1 characters, one a byte) on a new
connection to 127.0.0.1:PORT and answer what comes back until the server
closes the connection (or, after DEADLINE seconds, what came until then),
and :CLOSED or :DEADLINE, which of the two ended the wait.  With CLOSE
false the connection is closed at once, without reading."
  (call-with-loopback-stream
   port
   (lambda (s)
     ;; A server that refuses a request early may close before reading all
     ;; of it: what it answered is still read.
     (handler-case (progn (write-string request s) (finish-output s))
       (stream-error () nil))
     (when close
       (read-answer s (deadline-after deadline))))))

(defun send-until-answered (port head chunk times &key (deadline 30))
  "Send HEAD on a new connection to 127.0.0.1:PORT, then CHUNK up to TIMES
times, stopping at the first byte of an answer or when the server closed
the connection; answers how many chunks were sent, what came back (read
as READ-ANSWER reads it, at most DEADLINE seconds after the last chunk)
and :CLOSED or :DEADLINE."
  (call-with-loopback-stream
   port
   (lambda (s)
     (let ((sent 0) (first nil))
       (handler-case
           (progn (write-string head s)
                  (finish-output s)
                  (loop while (< sent times)
                        do (setf first (handler-case (read-char-no-hang s nil :eof)
                                         (error () :eof)))
                        until first
                        do (write-string chunk s)
                           (finish-output s)
                           (incf sent)))
         (stream-error () nil))
       (multiple-value-bind (answer how)
           (if (eq first :eof)
               (values "" :closed)
               (read-answer s (deadline-after deadline) (if first (string first) "")))
         (values sent answer how))))))

(defun latin1-octets (string)
  (map '(vector (unsigned-byte 8)) #'char-code string))

(defun octets-latin1 (octets)
  (map 'string #'code-char octets))

(defun http (port method path &key body (headers '()) (deadline 30))
  "One request (BODY a string, sent as UTF-8, or octets); answers the
status (NIL when the connection closed without an answer), the body as a
string (UTF-8) and the header block."
  (let* ((octets (cond ((null body) nil)
                       ((stringp body) (rontolisp::%utf8-octets body))
                       (t body)))
         (request (concatenate 'string
                               (crlf-join (append (list (format nil "~A ~A HTTP/1.1" method path)
                                                        "Host: 127.0.0.1" "Connection: close")
                                                  (when octets
                                                    (list (format nil "Content-Length: ~D"
                                                                  (length octets))))
                                                  headers
                                                  (list "")))
                               (if octets (octets-latin1 octets) "")))
         (answer (http-raw port request :deadline deadline))
         (split (search (format nil "~C~C~C~C" #\Return #\Newline #\Return #\Newline) answer)))
    (if (and split (> (length answer) 12) (string= "HTTP/1." answer :end2 7))
        (values (parse-integer answer :start 9 :end 12)
                (rontolisp::%utf8-string (latin1-octets (subseq answer (+ split 4))))
                (subseq answer 0 split))
        (values nil answer ""))))

(defun http-json (port method path &optional body)
  "The status and the parsed JSON answer of one request."
  (multiple-value-bind (status text) (http port method path :body body)
    (values status (ignore-errors (yason:parse text)) text)))

(defun error-message-of (json)
  (and (hash-table-p json) (hash-table-p (gethash "error" json))
       (gethash "message" (gethash "error" json))))

(defun json-line (object)
  (with-output-to-string (s) (yason:encode object s)))

(defun serve-file () (decision-file "s1-pico" :f32))

;;; Shapes.

(test serve-answers-in-llama-server-shapes
  "GET /health, /props, /v1/models; an unknown path is a 404 and a wrong
method a 405, each in llama-server's error shape; /metrics only with
--metrics."
  (with-server (port (serve-file) "--parallel" "3")
    (multiple-value-bind (status json) (http-json port "GET" "/health")
      (is (eql 200 status))
      (is (equal "ok" (gethash "status" json))))
    (multiple-value-bind (status json) (http-json port "GET" "/props")
      (is (eql 200 status))
      (is (eql 3 (gethash "total_slots" json)))
      (is (equal (serve-file) (gethash "model_path" json))))
    (multiple-value-bind (status json) (http-json port "GET" "/v1/models")
      (is (eql 200 status))
      (is (equal "list" (gethash "object" json)))
      (is (eql 1024 (gethash "n_vocab" (gethash "meta" (first (gethash "data" json)))))))
    (multiple-value-bind (status json) (http-json port "GET" "/nowhere")
      (is (eql 404 status))
      (let ((e (gethash "error" json)))
        (is (eql 404 (gethash "code" e)))
        (is (equal "not_found_error" (gethash "type" e)))
        (is (stringp (gethash "message" e)))))
    (multiple-value-bind (status json) (http-json port "GET" "/tokenize")
      (is (eql 405 status))
      (is (search "expects POST, found GET" (error-message-of json))))
    (multiple-value-bind (status json) (http-json port "GET" "/metrics")
      (is (eql 501 status))
      (is (search "--metrics" (error-message-of json))))
    ;; A second server on the same port says why it cannot listen.
    (multiple-value-bind (code out err)
        (run-exe (list "serve" (serve-file) "--port" (princ-to-string port)))
      (declare (ignore out))
      (is (eql 1 code))
      (is (search (format nil "rontolisp serve: cannot listen on 127.0.0.1 port ~D: bind: " port)
                  err) "~S" err)))
  (multiple-value-bind (code out err) (run-exe (list "serve" (serve-file) "--host" "1.2.3"))
    (declare (ignore out))
    (is (eql 2 code))
    (is (search "--host expects an IPv4 or IPv6 address (or localhost), found \"1.2.3\"" err)))
  (with-server (port (serve-file) "--metrics")
    (http port "POST" "/tokenize" :body "{\"content\": \"abc\"}")
    (multiple-value-bind (status text) (http port "GET" "/metrics")
      (is (eql 200 status))
      (is (search "# TYPE llamacpp:requests_processing gauge" text))
      (is (search "rontolisp:requests_answered_total 1" text) "~A" text))))

(test serve-refuses-token-ids-naming-the-field
  "Token ids a model cannot take are a 400 whose message names the
request's field (and the prompt, from 1, when it holds several), what was
expected and what was found, and no Lisp function."
  (with-server (port (serve-file))
    (let ((long (format nil "[~{~D~^,~}]" (make-list 5000 :initial-element 5))))
      (loop for (path body start found)
              in `(("/embedding" "{\"content\": [999999]}" "field \"content\": expected token ids from 0 to "
                                                         "found 999999 at position 0")
                   ("/v1/embeddings" "{\"input\": [[1, 2], [3, 999999]]}"
                                     "field \"input\", prompt 2: expected token ids from 0 to "
                                     "found 999999 at position 1")
                   ("/embedding" ,(format nil "{\"content\": ~A}" long)
                                 "field \"content\": expected at most context_length = "
                                 "tokens, found 5000"))
            do (multiple-value-bind (status json text) (http-json port "POST" path body)
                 (let ((message (error-message-of json)))
                   (is (eql 400 status) "~A: ~A" path text)
                   (is (and message (eql 0 (search start message))) "~A: ~A" path text)
                   (is (and message (search found message)) "~A: ~A" path text)
                   (is (and message (not (search "model:" message))) "~A: ~A" path text)))))))

(test serve-refuses-ids-outside-the-vocabulary-naming-the-field
  "/detokenize's tokens and /tokenize's ids in a mixed content that the
model's vocabulary does not hold are a 400 naming the field, the ids
expected and the element found as JSON writes it with its position in the
request's array: no file path, no Lisp value, no Lisp function."
  (with-server (port (serve-file))
    (loop for (path body found)
            in '(("/detokenize" "{\"tokens\": [5, 999999]}" "found 999999 at position 1")
                 ("/detokenize" "{\"tokens\": [5, -1]}" "found -1 at position 1")
                 ("/detokenize" "{\"tokens\": [5, 1.5]}" "found 1.5 at position 1")
                 ("/tokenize" "{\"content\": [\"a\", 5, 999999], \"with_pieces\": true}"
                  "found 999999 at position 2"))
          for field = (if (string= path "/detokenize") "tokens" "content")
          do (multiple-value-bind (status json text) (http-json port "POST" path body)
               (let ((message (error-message-of json)))
                 (is (eql 400 status) "~A: ~A" path text)
                 (is (and message (eql 0 (search (format nil "field ~S: expected token ids from 0 to "
                                                         field)
                                                 message)))
                     "~A: ~A" path text)
                 (is (and message (search found message)) "~A: ~A" path text)
                 (is (and message (notany (lambda (s) (search s message))
                                          '("model:" ".gguf" "d0" "#(")))
                     "~A: ~A" path text))))))

;;; A metric's sample as /metrics gives it.
(defun metric-value (text name)
  "The sample of the metric NAME in the Prometheus TEXT, a string; NIL when
it has none."
  (loop for line in (split-lines text)
        when (and (> (length line) (length name)) (string= name line :end2 (length name))
                  (char= #\Space (char line (length name))))
          return (subseq line (1+ (length name)))))

(test serve-metrics-leave-out-the-metrics-request
  "llamacpp:requests_processing counts the requests in progress but the
/metrics request that asks, as llama-server counts its busy slots (which a
/metrics request never takes): a server with nothing else to do answers 0,
every time."
  (with-server (port (serve-file) "--metrics")
    (http port "POST" "/tokenize" :body "{\"content\": \"abc\"}")
    (dotimes (i 2)
      (multiple-value-bind (status text) (http port "GET" "/metrics")
        (is (eql 200 status))
        (is (equal "0" (metric-value text "llamacpp:requests_processing")) "~A" text)
        (is (equal "0" (metric-value text "llamacpp:requests_deferred")) "~A" text)))))

;;; Against llama-server itself (built by tests/build-llama-server.sh): the
;;; same requests to both servers on the same file answer the same keys
;;; and JSON types at every level, the same token ids and text, and
;;; embeddings within the encoder's agreement with llama.cpp.

(defun llama-server-program ()
  "llama.cpp's llama-server: RL_LLAMA_SERVER when set, else the one
tests/build-llama-server.sh builds; NIL when there is none."
  (let ((env (ext:getenv "RL_LLAMA_SERVER")))
    (find-if #'probe-file
             (remove nil (list (and env (plusp (length env)) env)
                               (namestring (merge-pathnames "build/cache/llama-server/llama-server"
                                                            *root*)))))))

(defun call-with-llama-server (program file function)
  "Run llama-server PROGRAM on FILE as an embedding server (mean pooling,
one 1024-token batch, one thread) on a free loopback port, wait until its
/health answers 200 (at most 60 s), call FUNCTION with the port, then end
it; answers FUNCTION's value."
  (let* ((out (tmp-path "llama-server-out")) (err (tmp-path "llama-server-err"))
         (process (run-child program (list "-m" (namestring file) "--embedding" "--pooling" "mean"
                                           "-ub" "1024" "-b" "1024" "-t" "1" "--metrics"
                                           "--host" "127.0.0.1" "--port" "0")
                             :input nil :output out :error err :if-output-exists :supersede
                             :if-error-exists :supersede :wait nil)))
    (unwind-protect
         (let ((port (announced-port err err "llama-server"))
               (deadline (+ (get-internal-real-time) (* 60 internal-time-units-per-second))))
           ;; It listens before the model is loaded, answering 503 until then.
           (loop until (eql 200 (http port "GET" "/health"))
                 do (when (> (get-internal-real-time) deadline)
                      (error "llama-server did not load ~A within 60 s: ~A" file
                             (ignore-errors (read-file-string err))))
                    (sleep 0.1))
           (funcall function port))
      (end-child process)
      (ignore-errors (delete-file out))
      (ignore-errors (delete-file err)))))

(defun shaped-json (text)
  "TEXT parsed with every JSON type kept apart: arrays as vectors, true
and false as YASON:TRUE and YASON:FALSE, null as :NULL; NIL when it is not
JSON."
  (let ((yason:*parse-json-arrays-as-vectors* t)
        (yason:*parse-json-booleans-as-symbols* t)
        (yason:*parse-json-null-as-keyword* t))
    (ignore-errors (yason:parse text))))

(defun json-type-name (value)
  (cond ((hash-table-p value) "object")
        ((stringp value) "string")
        ((vectorp value) "array")
        ((integerp value) "integer")
        ((realp value) "number")
        ((member value '(yason:true yason:false)) "boolean")
        (t "null")))

(defun json-shape (value &optional (path "") (table (make-hash-table :test 'equal)))
  "The shape of the parsed JSON VALUE: a table from each path (\".data[].index\")
to the list of the JSON types found there."
  (pushnew (json-type-name value) (gethash path table) :test #'string=)
  (cond ((hash-table-p value)
         (maphash (lambda (k v) (json-shape v (format nil "~A.~A" path k) table)) value))
        ((and (vectorp value) (not (stringp value)))
         (loop for x across value do (json-shape x (format nil "~A[]" path) table))))
  table)

(defparameter *llama-server-only-paths*
  '(".default_generation_settings.params" ".chat_template_caps" ".media_marker")
  "The parts of llama-server's answers ours leave out (doc/serve.md says
why): its text generation's sampling settings and its chat template's
capabilities, and the marker of media in multimodal prompts.")

(defun shape-differences (ours theirs)
  "How the shape of OURS differs from that of THEIRS (both parsed JSON): a
list of lines.  A path under an array that is empty on one side, or under
*LLAMA-SERVER-ONLY-PATHS*, is no difference."
  (let ((a (json-shape ours)) (b (json-shape theirs)) (lines '()))
    (labels ((under-empty-array-p (path table)
               (let ((at (search "[]" path :from-end t)))
                 (and at (let ((array (subseq path 0 at)))
                           (or (and (gethash array table)
                                    (null (gethash (format nil "~A[]" array) table)))
                               (under-empty-array-p array table))))))
             (left-out-p (path)
               (some (lambda (p) (alexandria:starts-with-subseq p path))
                     *llama-server-only-paths*)))
      (dolist (path (remove-duplicates (append (alexandria:hash-table-keys a)
                                               (alexandria:hash-table-keys b))
                                       :test #'string=))
        (let ((mine (gethash path a)) (its (gethash path b)))
          (unless (or (left-out-p path)
                      (and (null mine) (under-empty-array-p path a))
                      (and (null its) (under-empty-array-p path b))
                      (null (set-exclusive-or mine its :test #'string=)))
            (push (format nil "~A: ours ~:[none~;~:*~{~A~^|~}~], ~
llama-server's ~:[none~;~:*~{~A~^|~}~]"
                          path (sort (copy-list mine) #'string<) (sort (copy-list its) #'string<))
                  lines)))))
    (sort lines #'string<)))

(defparameter *llama-server-tolerance* 1d-4
  "The largest difference of an embedding from llama-server's, relative to
its largest value: the encoder's agreement with llama.cpp on F32 files
(test-model.lisp).")

(defun float-row-p (x)
  (and (vectorp x) (not (stringp x)) (plusp (length x)) (every #'realp x) (some #'floatp x)))

(defun value-differences (ours theirs &optional (path ""))
  "Where the values of OURS differ from llama-server's THEIRS (both parsed
JSON), on the paths both have: integers and strings equal, embedding rows
(arrays of numbers; base64 strings under an embedding) within
*LLAMA-SERVER-TOLERANCE* of the largest of llama-server's; a list of lines."
  (flet ((row-difference (mine its)
           (cond ((/= (length mine) (length its))
                  (list (format nil "~A: ~D numbers, llama-server's ~D" path
                                (length mine) (length its))))
                 (t (let ((big (reduce #'max its :key #'abs :initial-value 0d0))
                          (diff (reduce #'max (map 'vector (lambda (x y) (abs (- x y))) mine its)
                                        :initial-value 0d0)))
                      (unless (<= diff (* *llama-server-tolerance* big))
                        (list (format nil "~A: differs by ~,3e of the largest value (at most ~,0e)"
                                      path (if (zerop big) diff (/ diff big))
                                      *llama-server-tolerance*))))))))
    (cond ((and (hash-table-p ours) (hash-table-p theirs))
           (loop for k being the hash-keys of theirs using (hash-value v)
                 for (mine found) = (multiple-value-list (gethash k ours))
                 when found append (value-differences mine v (format nil "~A.~A" path k))))
          ((and (float-row-p ours) (float-row-p theirs)) (row-difference ours theirs))
          ((and (stringp ours) (stringp theirs) (contains path "embedding"))
           (row-difference (octets-f32 (base64-decode ours)) (octets-f32 (base64-decode theirs))))
          ((and (vectorp ours) (vectorp theirs) (not (stringp ours)) (not (stringp theirs)))
           (if (/= (length ours) (length theirs))
               (list (format nil "~A: ~D elements, llama-server's ~D" path
                             (length ours) (length theirs)))
               (loop for x across ours for y across theirs for i from 0
                     append (value-differences x y (format nil "~A[~D]" path i)))))
          ((equal ours theirs) nil)
          (t (flet ((brief (x)
                      (let ((text (princ-to-string (or (ignore-errors (json-line x)) x))))
                        (if (> (length text) 200) (format nil "~A..." (subseq text 0 200)) text))))
               (list (format nil "~A: ours ~A, llama-server's ~A" path (brief ours)
                             (brief theirs))))))))

(defun cors-headers (port)
  "What a browser on another origin sees: the status and the
Access-Control- headers (name and value, lowercase names, sorted) of a
preflight OPTIONS /tokenize and of the POST that follows, both with an
Origin header."
  (flet ((cors (method body)
           (multiple-value-bind (status text headers)
               (http port method "/tokenize" :body body
                                             :headers '("Origin: http://example.test"
                                                        "Access-Control-Request-Method: POST"))
             (declare (ignore text))
             (list status
                   (sort (loop for line in (split-lines (remove #\Return headers))
                               for colon = (position #\: line)
                               for name = (and colon (string-downcase (subseq line 0 colon)))
                               when (and name (alexandria:starts-with-subseq "access-control-" name)
                                         (string/= name "access-control-allow-methods"))
                                 collect (list name (string-trim " " (subseq line (1+ colon)))))
                         #'string< :key #'first)))))
    (list (cors "OPTIONS" nil) (cors "POST" "{\"content\": \"ab\"}"))))

(defun metric-types (text)
  "The metrics of the Prometheus TEXT whose sample is a number: a list of
(name type), from its # TYPE lines."
  (loop for line in (split-lines text)
        for words = (split-words line)
        when (and (= 4 (length words)) (string= "#" (first words))
                  (string= "TYPE" (second words))
                  (loop for l in (split-lines text)
                        thereis (let ((w (split-words l)))
                                  (and (= 2 (length w)) (string= (third words) (first w))
                                       (ignore-errors
                                        (realp (let ((*read-eval* nil))
                                                 (read-from-string (second w)))))))))
          collect (list (third words) (fourth words))))

(defun split-words (line)
  (remove "" (rontolisp::split-on #\Space line) :test #'string=))

(defun json-at (json path)
  "The value of the parsed JSON at PATH, a list of keys and indexes; NIL
where there is none."
  (loop for step in path
        do (setf json (cond ((and (stringp step) (hash-table-p json)) (gethash step json))
                            ((and (integerp step) (vectorp json) (< step (length json)))
                             (aref json step))))
        finally (return json)))

(defparameter *llama-server-requests*
  ;; (method path body &key values status): VALUES T (compare every value),
  ;; NIL (the shape only) or the paths of the values to compare (keys and
  ;; indexes); STATUS (ours llama-server's) where they differ: doc/serve.md's
  ;; table says why.
  '(("GET" "/health" nil)
    ("GET" "/props" nil :values (("default_generation_settings" "n_ctx") ("total_slots")
                                 ("model_alias") ("model_path") ("model_ftype") ("modalities")
                                 ("chat_template") ("bos_token") ("eos_token")))
    ("GET" "/v1/models" nil :values (("data" 0 "id") ("data" 0 "aliases") ("data" 0 "meta")
                                     ("models" 0 "name") ("models" 0 "model")))
    ("POST" "/tokenize" "{\"content\": \"hello world, caf\\u00e9\"}")
    ("POST" "/tokenize" "{\"content\": \"hello [MASK] world\", \"add_special\": true}")
    ("POST" "/tokenize" "{\"content\": \"a [MASK] caf\\u00e9 \\ud83d\\ude00\", \"with_pieces\": true}")
    ("POST" "/tokenize" "{\"content\": [\"hello\", 5, \" world [MASK]\"], \"add_special\": true}")
    ("POST" "/tokenize" "{\"content\": [7, \"hello\"], \"add_special\": true}")
    ("POST" "/tokenize" "{\"content\": \"a [MASK] b\", \"parse_special\": false}")
    ("POST" "/detokenize" "{\"tokens\": [2, 109, 106, 113, 113, 116, 37, 4, 3]}")
    ("POST" "/embedding" "{\"content\": \"hello world\"}")
    ("POST" "/embedding" "{\"content\": [\"hello world\", [5, 6, 7]], \"embd_normalize\": -1}")
    ("POST" "/embedding" "{\"content\": \"another text\", \"embd_normalize\": 1}")
    ("POST" "/embedding" "{\"content\": [\"a third\", \"and a fourth\"], \"embd_normalize\": 0}")
    ("POST" "/v1/embeddings" "{\"input\": \"hello world\"}")
    ("POST" "/v1/embeddings" "{\"input\": [\"hello world\", \"a second text\"]}")
    ("POST" "/v1/embeddings" "{\"input\": [[5, 6, 7], [8, 9]], \"encoding_format\": \"float\"}")
    ("POST" "/v1/embeddings" "{\"input\": \"hello world\", \"encoding_format\": \"base64\"}")
    ;; a flat array holding ids is one prompt; strings in it are tokenized,
    ;; the file's bos and eos only around a first one
    ("POST" "/embedding" "{\"content\": [\"hello\", 5, 6, \"world\"]}")
    ("POST" "/v1/embeddings" "{\"input\": [[\"hello\", 5], \"world\", [7, 8], {\"prompt_string\": \"hi\"}]}")
    ("POST" "/embedding" "{\"content\": []}" :values nil :status (400 500))
    ("GET" "/nowhere" nil :values nil)
    ("POST" "/v1/embeddings" "{\"model\": \"m\"}" :values nil)
    ("POST" "/v1/embeddings" "{\"input\": \"a\", \"encoding_format\": \"hex\"}" :values nil)
    ("POST" "/tokenize" "{\"content\": " :values nil :status (400 500))
    ("POST" "/detokenize" "{\"tokens\": \"x\"}" :values nil :status (400 500))
    ("GET" "/tokenize" nil :values nil :status (405 404)))
  "The requests sent to both servers.")

(test serve-answers-as-llama-server-does
  "The same requests to `rontolisp serve' and to llama-server on the same
mean-pooling file answer the same status, keys and JSON types at every
level (*LLAMA-SERVER-ONLY-PATHS* aside), the same ids and texts, and
embeddings within *LLAMA-SERVER-TOLERANCE*."
  (let ((program (llama-server-program)))
    (if (null program)
        (skip-reference "llama-server is missing (run sh tests/build-llama-server.sh, or set ~
RL_LLAMA_SERVER)")
        (let ((file (tmp-path "mean.gguf")))
          ;; llama.cpp strips the space before [MASK] (as the file's
          ;; skycmd.tokenizer.lstrip_ids says) only when general.name
          ;; names modern-bert.
          (multiple-value-bind (code out err)
              (run-exe (list "edit" (encoder-file "s1-nano" :f32) file
                             "--set" "modern-bert.pooling_type=1:u32"
                             "--set" "general.name=modern-bert-random:string"))
            (declare (ignore out))
            (is (eql 0 code) "edit: ~A" err))
          (flet ((ask-all (port)
                   ;; the answers, then the metrics after them
                   (append (loop for (method path body) in *llama-server-requests*
                                 collect (multiple-value-bind (status text)
                                             (http port method path :body body)
                                           (list status (shaped-json text) text)))
                           (list (cors-headers port))
                           (list (metric-types (nth-value 1 (http port "GET" "/metrics")))))))
            (let ((theirs (call-with-llama-server program file #'ask-all))
                  (ours (with-server (port file "--metrics") (ask-all port))))
              ;; A browser's preflight and its request: the same CORS answer.
              (is (equal (car (last theirs 2)) (car (last ours 2)))
                  "CORS: ours ~S, llama-server's ~S" (car (last ours 2)) (car (last theirs 2)))
              ;; Every metric of llama-server's, of the same type, a number.
              (let ((mine (car (last ours))))
                (is (< 10 (length (car (last theirs)))) "llama-server's metrics: ~S"
                    (car (last theirs)))
                (loop for (name type) in (car (last theirs))
                      do (is (equal (list name type) (assoc name mine :test #'string=))
                             "metric ~A: llama-server's is a ~A, ours ~:[missing~;~:*~{~*a ~A~}~]"
                             name type (assoc name mine :test #'string=))))
              (loop for (method path body . keys) in *llama-server-requests*
                    for (status json text) in ours
                    for (their-status their-json their-text) in theirs
                    for what = (format nil "~A ~A~@[ ~A~]" method path body)
                    do (destructuring-bind (&key (values t) ((:status status-pair))) keys
                         (is (equal (or status-pair (list their-status their-status))
                                    (list status their-status))
                             "~A: status ~A, llama-server's ~A" what status their-status)
                         (is (and json their-json) "~A: not JSON: ~A / ~A" what text their-text)
                         (let ((shape (shape-differences json their-json)))
                           (is (null shape) "~A: the shapes differ:~{~%  ~A~}" what shape))
                         (when values
                           (let ((diff (if (eq values t)
                                           (value-differences json their-json)
                                           (loop for at in values
                                                 for where = (format nil "~{.~A~}" at)
                                                 append (if (json-at their-json at)
                                                            (value-differences
                                                             (json-at json at)
                                                             (json-at their-json at) where)
                                                            (list (format nil "~A: llama-server ~
has none" where)))))))
                             (is (null diff) "~A: the values differ:~{~%  ~A~}" what
                                 (subseq diff 0 (min 10 (length diff))))))))))
          (delete-file file)))))

;;; The numbers of the command line.

(test serve-tokenize-equals-tokenize
  "/tokenize answers `tokenize --json''s ids (add_special true) and
`tokenize --no-special''s (the default, as llama-server's); /detokenize
gives the text back; with_pieces gives each token's text, or its bytes
when they are not UTF-8."
  (let* ((file (serve-file)) (text "hello [MASK] world, cafe")
         (with (yason:parse (nth-value 1 (run-exe (list "tokenize" file text "--json")))))
         (without (yason:parse (nth-value 1 (run-exe (list "tokenize" file text "--json"
                                                           "--no-special"))))))
    (with-server (port file)
      (multiple-value-bind (status json)
          (http-json port "POST" "/tokenize"
                     (json-line (alexandria:plist-hash-table
                                 (list "content" text "add_special" t) :test 'equal)))
        (is (eql 200 status))
        (is (equal (gethash "ids" with) (gethash "tokens" json))))
      (multiple-value-bind (status json)
          (http-json port "POST" "/tokenize" (format nil "{\"content\": ~S}" text))
        (is (eql 200 status))
        (is (equal (gethash "ids" without) (gethash "tokens" json))))
      (let ((plain "hello world, cafe"))
        (multiple-value-bind (status back)
            (http-json port "POST" "/detokenize"
                       (format nil "{\"tokens\": [~{~D~^, ~}]}"
                               (gethash "tokens" (nth-value 1 (http-json port "POST" "/tokenize"
                                                                         (format nil "{\"content\": ~S}" plain))))))
          (is (eql 200 status))
          (is (equal plain (gethash "content" back)))))
      (multiple-value-bind (status json)
          (http-json port "POST" "/tokenize" "{\"content\": \"ab\", \"with_pieces\": true}")
        (is (eql 200 status))
        (is (equal '("a" "b") (mapcar (lambda (p) (gethash "piece" p)) (gethash "tokens" json))))
        (is (every (lambda (p) (integerp (gethash "id" p))) (gethash "tokens" json))))
      ;; "é" is two tokens of one byte each here: each piece is its byte in
      ;; an array, as llama-server gives a piece that is not UTF-8.
      (multiple-value-bind (status json)
          (http-json port "POST" "/tokenize"
                     (json-line (alexandria:plist-hash-table (list "content" "é" "with_pieces" t)
                                                             :test 'equal)))
        (is (eql 200 status))
        (is (equal '((195) (169)) (mapcar (lambda (p) (gethash "piece" p)) (gethash "tokens" json)))
            "~S" (mapcar (lambda (p) (gethash "piece" p)) (gethash "tokens" json)))))))

(defun base64-decode (string)
  (let ((alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        (bits 0) (n 0) (out '()))
    (loop for c across string
          for v = (position c alphabet)
          when v do (setf bits (logior (ash bits 6) v)) (incf n 6)
                    (when (>= n 8)
                      (decf n 8)
                      (push (ldb (byte 8 n) bits) out)))
    (coerce (nreverse out) '(vector (unsigned-byte 8)))))

(test serve-embeddings-equal-embed-json
  "/embedding and /v1/embeddings (float and base64) answer `embed --json''s
numbers for the same texts and ids, with the same normalization."
  (let* ((file (serve-file)) (text "a short text to embed")
         (by-text (first (embed-json (list file "--text" text))))
         (by-ids (first (embed-json (list file "--tokens" "2,17,9,3"))))
         (raw (first (embed-json (list file "--text" text "--normalize" "-1")))))
    (with-server (port file)
      (multiple-value-bind (status json)
          (http-json port "POST" "/embedding" (format nil "{\"content\": ~S}" text))
        (is (eql 200 status))
        (is (eql 0 (gethash "index" (first json))))
        (is (equal (gethash "embeddings" by-text) (gethash "embedding" (first json)))))
      (multiple-value-bind (status json)
          (http-json port "POST" "/embedding"
                     (format nil "{\"content\": [~S, [2, 17, 9, 3]], \"embd_normalize\": -1}" text))
        (is (eql 200 status))
        (is (equal (gethash "embeddings" raw) (gethash "embedding" (first json))))
        (is (eql 1 (gethash "index" (second json)))))
      (multiple-value-bind (status json)
          (http-json port "POST" "/v1/embeddings"
                     (format nil "{\"input\": [~S, [2, 17, 9, 3]]}" text))
        (is (eql 200 status))
        (is (equal "list" (gethash "object" json)))
        (let ((data (gethash "data" json)))
          (is (equal (first (gethash "embeddings" by-text)) (gethash "embedding" (first data))))
          (is (equal (first (gethash "embeddings" by-ids)) (gethash "embedding" (second data))))
          (is (equal "embedding" (gethash "object" (first data)))))
        (is (eql (+ 4 (length (gethash "tokens" by-text)))
                 (gethash "prompt_tokens" (gethash "usage" json)))))
      (multiple-value-bind (status json)
          (http-json port "POST" "/v1/embeddings"
                     (format nil "{\"input\": ~S, \"encoding_format\": \"base64\"}" text))
        (is (eql 200 status))
        (let ((octets (base64-decode (gethash "embedding" (first (gethash "data" json)))))
              (expected (first (gethash "embeddings" by-text))))
          (is (= (* 4 (length expected)) (length octets)))
          (is (equal (mapcar (lambda (x) (single-bits (coerce x 'single-float))) expected)
                     (loop for i from 0 below (length octets) by 4
                           collect (loop for j below 4
                                         sum (ash (aref octets (+ i j)) (* 8 j)))))))))))

(test serve-embeds-every-token-of-a-file-that-does-not-pool
  "A file without pooling (pooling_type 0): /embedding answers a row per
token, as `embed --json' prints them; /v1/embeddings refuses it, as
llama-server does."
  (let ((file (tmp-path "nopool.gguf")))
    (multiple-value-bind (code out err)
        (run-exe (list "edit" (serve-file) file "--set" "modern-bert.pooling_type=0:u32"))
      (declare (ignore out))
      (is (eql 0 code) "edit: ~A" err))
    (let ((expected (first (embed-json (list file "--text" "ab")))))
      (is (= 4 (length (gethash "embeddings" expected))))
      (with-server (port file)
        (multiple-value-bind (status json) (http-json port "POST" "/embedding" "{\"content\": \"ab\"}")
          (is (eql 200 status))
          (is (equal (gethash "embeddings" expected) (gethash "embedding" (first json)))))
        (multiple-value-bind (status json)
            (http-json port "POST" "/v1/embeddings" "{\"input\": \"ab\"}")
          (is (eql 400 status))
          (is (search "Pooling type 'none' is not OAI compatible" (error-message-of json))))))
    (delete-file file)))

(defparameter *serve-questions*
  '("{\"type\": \"score\", \"instructions\": \"2 + 2 = 4?\", \"options\": [\"yes\", \"no\"], \"state\": \"quiz 3/10\"}"
    "{\"type\": \"choice\", \"instructions\": \"Tokenizer file?\", \"options\": [\"tokenizer.json\", {\"text\": \"config.json\"}, \"model.safetensors\"], \"state\": \"ls: 3 files\"}"
    "{\"type\": \"noul\", \"instructions\": \"Ask the user?\", \"options\": [\"go on\", \"ask\"], \"state\": \"two files match\"}")
  "Questions as `decide' reads them, one a line.")

(test serve-decide-equals-decide-json
  "/decide answers `decide --json''s ids, markers, logits and probabilities,
one question or a list of them, from several connections at once; a bad
question is a 400 naming it and the reason `decide' names."
  (let* ((file (serve-file))
         (questions (write-file-string (tmp-path "questions.jsonl")
                                       (format nil "~{~A~%~}" *serve-questions*)))
         (bad "{\"type\": \"score\", \"instructions\": \"x\", \"options\": [\"a\"]}")
         (bad-file (write-file-string (tmp-path "bad.jsonl") (format nil "~A~%" bad)))
         (expected (multiple-value-bind (code out err) (run-exe (list "decide" file questions "--json"))
                     (is (eql 0 code) "decide: ~A" err)
                     (mapcar #'yason:parse (split-lines out))))
         (reason (nth-value 2 (run-exe (list "decide" file bad-file "--json")))))
    (flet ((same (want got)
             (dolist (key '("ids" "markers" "logits" "probabilities"))
               (is (equal (gethash key want) (gethash key got)) "~A differs" key))))
      (with-server (port file "--parallel" "2")
        (multiple-value-bind (status json) (http-json port "POST" "/decide" (first *serve-questions*))
          (is (eql 200 status))
          (same (first expected) json)
          (is (equal '("yes" "no") (gethash "options" json))))
        (multiple-value-bind (status json)
            (http-json port "POST" "/decide"
                       (format nil "{\"questions\": [~{~A~^, ~}]}" *serve-questions*))
          (is (eql 200 status))
          (is (= 3 (length (gethash "answers" json))))
          (mapc #'same expected (gethash "answers" json))
          (is (equal '("tokenizer.json" "config.json" "model.safetensors")
                     (gethash "options" (second (gethash "answers" json))))))
        ;; Six requests on six connections at once, answered by two workers.
        (let* ((request (concatenate 'string
                                     (crlf-join (list "POST /decide HTTP/1.1" "Host: x"
                                                      "Connection: close"
                                                      (format nil "Content-Length: ~D"
                                                              (length (third *serve-questions*)))
                                                      ""))
                                     (third *serve-questions*)))
               (answers (make-array 6 :initial-element nil))
               (threads (loop for i below 6
                              collect (let ((i i))
                                        (mp:process-run-function
                                         "serve client"
                                         (lambda () (setf (aref answers i) (http-raw port request))))))))
          (mapc #'mp:process-join threads)
          (loop for a across answers
                for body = (subseq a (+ 4 (search (format nil "~C~C~C~C" #\Return #\Newline
                                                          #\Return #\Newline) a)))
                do (is (string= "HTTP/1.1 200" a :end2 12))
                   (same (third expected) (yason:parse body))))
        (multiple-value-bind (status json)
            (http-json port "POST" "/decide"
                       (format nil "{\"questions\": [~A, ~A]}" (first *serve-questions*) bad))
          (is (eql 400 status))
          (is (search "question 2: expected the field \"state\", found none" (error-message-of json))
              "~S" (error-message-of json))
          (is (search "expected the field \"state\", found none" reason) "decide said ~S" reason))
        (multiple-value-bind (status json) (http-json port "POST" "/decide" "[1, 2]")
          (is (eql 400 status))
          (is (search "expected a JSON object" (error-message-of json))))))
    (delete-file questions)
    (delete-file bad-file)))

;;; The API key.

(test serve-requires-the-api-key-but-for-health
  "With --api-key-file, every path but /health wants Authorization: Bearer
KEY (401 without it or with another key); SIGINT ends the server with 0."
  (let ((key-file (write-file-string (tmp-path "key") (format nil "s3cret~%"))))
    (multiple-value-bind (value code log)
        (call-with-server
         (list (serve-file) "--api-key-file" key-file)
         (lambda (port)
           (is (eql 200 (http port "GET" "/health")))
           (multiple-value-bind (status text) (http port "GET" "/props")
             (is (eql 401 status))
             (is (search "\"authentication_error\"" text)))
           (is (eql 401 (http port "GET" "/props" :headers '("Authorization: Bearer s3cre"))))
           (is (eql 401 (http port "GET" "/props" :headers '("Authorization: Bearer s3cret!"))))
           (is (eql 401 (http port "GET" "/props" :headers '("Authorization: s3cret"))))
           (is (eql 200 (http port "GET" "/props" :headers '("Authorization: Bearer s3cret"))))
           (is (eql 200 (http port "POST" "/tokenize" :body "{\"content\": \"x\"}"
                                                      :headers '("Authorization: Bearer s3cret"))))))
      (declare (ignore value))
      (is (eql 0 code) "~A" log))
    (delete-file key-file))
  ;; SIGINT, with a request answered first.
  (let* ((out (tmp-path "serve-out"))
         (process (run-child *exe* (list "serve" (serve-file) "--port" "0")
                             :input nil :output out :error nil :if-output-exists :supersede
                             :wait nil)))
    (unwind-protect
         (let* ((line (wait-for-line out "listening on http://127.0.0.1:"
                                     (+ (get-internal-real-time)
                                        (* 60 internal-time-units-per-second))))
                (port (and line (parse-integer line :start (1+ (position #\: line :from-end t))))))
           (is (eql 200 (http port "GET" "/health")))
           (signal-process process 2)
           (is (equal '(:exited 0)
                      (multiple-value-list
                       (wait-child process :deadline 30 :what "serve after SIGINT")))))
      (end-child process)
      (ignore-errors (delete-file out)))))

;;; The page at GET /.

(defvar *trained-file* nil "The trained model (tests/models/pico-tasks) as a GGUF file.")

(defun trained-file ()
  "tests/models/pico-tasks converted by `convert' (F32), once per run: its
probabilities are far from 1/N, so the page's bars show something."
  (or *trained-file*
      (let ((path (tmp-path "pico-tasks.gguf")))
        (multiple-value-bind (code out err)
            (run-exe (list "convert" (namestring (merge-pathnames "tests/models/pico-tasks" *root*))
                           path "--type" "f32"))
          (declare (ignore out))
          (unless (eql 0 code) (error "convert tests/models/pico-tasks: ~A" err)))
        (setf *trained-file* path))))

(defun status-done (id)
  "The page's condition that the request of the form whose status is ID
has been answered (well or not)."
  (format nil "['done', 'failed'].includes(document.getElementById('~A').dataset.state)" id))

(test serve-page-is-served-without-the-key
  "GET / answers the page, self-contained (no script, style or image from
elsewhere), even with --api-key, which every request the page makes still
needs."
  (with-server (port (serve-file) "--api-key" "page-key")
    (multiple-value-bind (status text headers) (http port "GET" "/")
      (is (eql 200 status))
      (is (search "Content-Type: text/html; charset=utf-8" headers) "~A" headers)
      (is (search "<form id=\"decide-form\"" text))
      (is (search "<form id=\"tokenize-form\"" text))
      (is (search "id=\"api-key\"" text))
      (dolist (external '("src=\"http" "href=\"http" "src=\"//" "href=\"//" "@import" "url("))
        (is (not (search external text)) "the page loads ~A" external)))
    (is (eql 401 (http port "POST" "/decide" :body "{}")))
    (is (eql 405 (http port "POST" "/" :body "{}" :headers '("Authorization: Bearer page-key"))))))

(test serve-page-answers-in-a-browser
  "In headless chromium, a question typed into the page's form (with the
key typed into its field) and sent with its button is answered as bars
whose values are the probabilities POST /decide answers, and a text sent
with Ctrl+Enter as tokens whose ids and pieces are those of POST /tokenize
(with_pieces), a piece that is not UTF-8 shown as its bytes; nothing is
logged as an error.  The screenshot is README's
picture."
  (with-browser ()
    (let* ((file (trained-file))
           (key "page-key")
           (auth (list (format nil "Authorization: Bearer ~A" key)))
           (question (list "type" "count" "instructions" "Count the entries."
                           "options" '("2" "3" "4" "5") "state" "items: tiger table zinc"))
           (text "Count the files: notes.txt, main.c, café")
           (shot (page-screenshot "serve"))
           (*read-default-float-format* 'double-float))
      (ignore-errors (delete-file shot))
      (with-server (port file "--api-key" key)
        (let ((expected (yason:parse
                         (nth-value 1 (http port "POST" "/decide" :headers auth
                                            :body (json-line (alexandria:plist-hash-table
                                                              question :test 'equal))))))
              (tokens (yason:parse
                       (nth-value 1 (http port "POST" "/tokenize" :headers auth
                                          :body (json-line (alexandria:plist-hash-table
                                                            (list "content" text "with_pieces" t)
                                                            :test 'equal)))))))
          (multiple-value-bind (results errors)
              (browse (format nil "http://127.0.0.1:~D/" port)
                      `((:type "#api-key" :text ,key)
                        (:type "#q-type" :text "count")
                        (:type "#q-instructions" :text "Count the entries.")
                        (:type "#q-options" :text ,(format nil "2~%3~%4~%5"))
                        (:type "#q-state" :text "items: tiger table zinc")
                        (:click "#decide-button")
                        (:wait ,(status-done "decide-status"))
                        (:eval "document.getElementById('decide-status').dataset.state")
                        (:eval "[...document.querySelectorAll('#decide-answer .option')].map(o => [o.querySelector('.text').textContent, o.querySelector('.bar').dataset.probability, o.querySelector('.bar').style.width])")
                        (:type "#t-text" :text ,text)
                        (:press "Enter" :ctrl t)
                        (:wait ,(status-done "tokenize-status"))
                        (:eval "document.getElementById('tokenize-status').dataset.state")
                        (:eval "[...document.querySelectorAll('#tokenize-answer .token')].map(t => [Number(t.dataset.id), JSON.parse(t.dataset.piece)])")
                        (:eval "[...document.querySelectorAll('#tokenize-answer .piece.bytes')].map(p => p.textContent)")
                        (:screenshot ,shot)))
            (destructuring-bind (decide-state bars tokenize-state chips byte-chips) results
              (is (equal "done" decide-state))
              (is (equal '("2" "3" "4" "5") (mapcar #'first bars)))
              (let ((shown (mapcar (lambda (b) (let ((*read-eval* nil)) (read-from-string (second b))))
                                   bars))
                    (answered (gethash "probabilities" expected)))
                (is (= 4 (length answered)))
                (is (every (lambda (a b) (and (typep a 'double-float) (= a b))) shown answered)
                    "bars ~S, /decide ~S" shown answered)
                ;; The trained model is sure of "3": the bars show it.
                (is (> (second shown) 0.5d0) "~S" shown))
              (is (every (lambda (b) (search "%" (third b))) bars))
              (is (equal "done" tokenize-state))
              (is (equal (map 'list (lambda (tk) (list (gethash "id" tk) (gethash "piece" tk)))
                              (gethash "tokens" tokens))
                         chips)
                  "page ~S" chips)
              ;; "é" is two tokens of a byte each: shown as those bytes
              (is (equal '("<0xC3>" "<0xA9>") byte-chips) "~S" byte-chips))
            (is (null errors) "the page logged ~S" errors)
            (is (png-file-p shot))))))))

;;; Abuse.

(test serve-survives-abuse
  "Each bad request gets its status or a closed connection, and the server
goes on answering: a malformed request line, a 1 MB header, a body over
--max-body (with a length and chunked), invalid JSON, invalid UTF-8, JSON nested 100,000
deep, a text over the model's context (400 naming both numbers), clients
that leave mid-request or before their answer, a connection left idle and
a chunked body left unfinished (each closed after --timeout)."
  (with-server (port (serve-file) "--max-body" "200000" "--timeout" "5")
    (let ((answer (http-raw port (crlf-join (list "GARBAGE" "" "")))))
      (is (or (string= "" answer) (string= "HTTP/1.1 400" answer :end2 (min 12 (length answer))))
          "~S" answer))
    (multiple-value-bind (status json)
        (http-json port "POST" "/tokenize" (make-string 300000 :initial-element #\a))
      (is (eql 413 status))
      (is (equal "invalid_request_error" (gethash "type" (gethash "error" json)))))
    (let* ((chunk (make-string 50000 :initial-element #\a))
           (answer (http-raw port (concatenate
                                   'string
                                   (crlf-join (list "POST /tokenize HTTP/1.1" "Host: x"
                                                    "Connection: close"
                                                    "Transfer-Encoding: chunked" ""))
                                   (format nil "~{~A~}"
                                           (loop repeat 5
                                                 collect (crlf-join (list (format nil "~X" 50000)
                                                                          chunk))))
                                   (crlf-join (list "0" ""))))))
      (is (string= "HTTP/1.1 413" answer :end2 (min 12 (length answer))) "~S"
          (subseq answer 0 (min 200 (length answer)))))
    (multiple-value-bind (status text)
        (http port "GET" "/health"
                   :headers (list (format nil "X-Big: ~A" (make-string (* 1024 1024)
                                                                       :initial-element #\h))))
      (is (or (null status) (eql 431 status)) "a 1 MB header: ~S ~S" status text))
    ;; The documented limit: headers of 16 KiB pass, of 40 KiB do not.
    (flet ((with-header (bytes)
             (http port "GET" "/health"
                   :headers (list (format nil "X-Big: ~A" (make-string bytes :initial-element #\h))))))
      (is (eql 200 (with-header (* 16 1024))))
      (is (eql 431 (with-header (* 40 1024)))))
    (multiple-value-bind (status json) (http-json port "POST" "/tokenize" "{\"content\": ")
      (is (eql 400 status))
      (is (search "invalid JSON" (error-message-of json))))
    (multiple-value-bind (status json)
        (http-json port "POST" "/tokenize"
                   (octets "{\"content\": \"a" #xff #xfe "b\"}"))
      (is (eql 400 status))
      (is (search "unable to decode byte 0xff" (error-message-of json)) "~S"
          (error-message-of json)))
    (multiple-value-bind (status json)
        (http-json port "POST" "/tokenize"
                   (concatenate 'string (make-string 100000 :initial-element #\[)
                                (make-string 100000 :initial-element #\])))
      (is (eql 400 status))
      (is (search "depth" (error-message-of json)) "~S" (error-message-of json)))
    (multiple-value-bind (status json)
        (http-json port "POST" "/embedding"
                   (format nil "{\"content\": ~S}"
                           (with-output-to-string (s) (loop repeat 1100 do (write-string "b " s)))))
      (is (eql 400 status))
      (let ((message (error-message-of json)))
        (is (search "context_length = 1024" message) "~S" message)
        (is (search "found 2202" message) "~S" message)))
    ;; A client that sends half a body and goes, one that sends half a
    ;; header and goes.
    (http-raw port (concatenate 'string
                                (crlf-join (list "POST /tokenize HTTP/1.1" "Host: x"
                                                 "Content-Length: 100" ""))
                                "{\"content\"")
              :close nil)
    (http-raw port "GET /health HTTP/1.1" :close nil)
    ;; Whole requests whose clients leave before the answer, while it is
    ;; queued or computed.
    (loop repeat 40
          do (http-raw port (concatenate 'string
                                         (crlf-join (list "POST /decide HTTP/1.1" "Host: x"
                                                          (format nil "Content-Length: ~D"
                                                                  (length (first *serve-questions*)))
                                                          ""))
                                         (first *serve-questions*))
                       :close nil))
    ;; One that sends half a header and waits, one half a chunked body:
    ;; each closed after --timeout, both waited for at once.
    (let* ((stalled (list (crlf-join (list "GET /health HTTP/1.1" "Host: x"))
                          (concatenate 'string
                                       (crlf-join (list "POST /tokenize HTTP/1.1" "Host: x"
                                                        "Transfer-Encoding: chunked" ""))
                                       (crlf-join (list "10" "{\"content\": \"abc")))))
           (ends (make-array 2 :initial-element nil))
           (threads (loop for request in stalled for i from 0
                          collect (let ((request request) (i i))
                                    (mp:process-run-function
                                     "stalled client"
                                     (lambda ()
                                       (setf (aref ends i)
                                             (multiple-value-list
                                              (http-raw port request :deadline 60)))))))))
      (mapc #'mp:process-join threads)
      (loop for (answer how) across ends
            do (is (eq :closed how) "a stalled connection stayed open: ~S" answer)))
    (is (eql 200 (http port "POST" "/tokenize" :body "{\"content\": \"still here\"}")))
    (is (eql 200 (http port "GET" "/health")))))

(test serve-closes-a-body-that-never-ends
  "A chunked body that goes on and on past --max-body is answered 413 or
its connection closed before the client has sent 100 times the limit, and
the server goes on; so is a body declared far larger than the limit."
  (with-server (port (serve-file) "--max-body" "200000")
    (let ((chunk (crlf-join (list (format nil "~X" 65536) (make-string 65536 :initial-element #\a)))))
      (multiple-value-bind (sent answer how)
          (send-until-answered port (crlf-join (list "POST /tokenize HTTP/1.1" "Host: x"
                                                     "Transfer-Encoding: chunked" ""))
                               chunk 300)
        (is (< sent 300) "the server read all ~D chunks (~,1F MB) of an endless body: ~S ~S"
            sent (/ (* sent 65536) 1d6) how (subseq answer 0 (min 100 (length answer))))
        (is (or (and (eq how :closed) (string= "" answer))
                (string= "HTTP/1.1 413" answer :end2 (min 12 (length answer))))
            "~S ~S" how (subseq answer 0 (min 100 (length answer)))))
      (multiple-value-bind (sent answer how)
          (send-until-answered port (crlf-join (list "POST /tokenize HTTP/1.1" "Host: x"
                                                     "Content-Length: 1000000000000" ""))
                               (make-string 65536 :initial-element #\a) 300)
        (is (< sent 300) "the server read all ~D chunks of a 1 TB body: ~S ~S"
            sent how (subseq answer 0 (min 100 (length answer))))))
    (is (eql 200 (http port "POST" "/tokenize" :body "{\"content\": \"still here\"}")))))

;;; Load, with the load client tools/serve_load.c.

(defparameter *serve-load*
  (or (ext:getenv "RONTOLISP_SERVE_LOAD")
      (namestring (merge-pathnames "build/tools/serve_load" *root*)))
  "The load client (make tools builds it).")

(defun serve-load (port &rest args)
  "Run the load client on PORT with ARGS (strings), at most 300 s: its exit
status and its report line (with its standard error)."
  (let ((out (tmp-path "load-out")))
    (unwind-protect
         (let ((code (run-child *serve-load* (list* "--port" (princ-to-string port) args)
                                :input nil :output out :error :output
                                :if-output-exists :supersede :deadline 300)))
           (values code (string-trim '(#\Newline) (read-file-string out))))
      (ignore-errors (delete-file out)))))

(defun resident-kb (pid)
  "The resident memory of the process PID in kB (VmRSS in /proc/PID/status)."
  (with-open-file (s (format nil "/proc/~D/status" pid))
    (loop for line = (read-line s nil)
          while line
          when (string= "VmRSS:" line :end2 (min 6 (length line)))
            return (parse-integer line :start 6 :junk-allowed t))))

(test serve-answers-10000-keep-alive-requests-in-bounded-memory
  "10,000 /decide requests from 32 keep-alive connections are all answered
200, and the server's resident memory after them is within 10% of what it
was after the first 1,000 (not under AddressSanitizer, whose quarantine
grows it by design: that bound is skipped there, saying so)."
  (skip-unless-file (*serve-load*)
    (let ((bodies (write-file-string (tmp-path "questions.jsonl")
                                     (format nil "~{~A~%~}" *serve-questions*))))
      (with-server (port (serve-file) "--parallel" "2")
        (let ((pid (ext:external-process-pid *server-process*)))
          (flet ((run (n)
                   (multiple-value-bind (code line)
                       (serve-load port "--path" "/decide" "--body-file" bodies "--lines"
                                   "--requests" (princ-to-string n) "--concurrency" "32")
                     (is (eql 0 code) "~D requests: ~A" n line)
                     (is (search "errors 0 " line) "~A" line))
                   (resident-kb pid)))
            (let* ((first (run 1000)) (last (run 9000)))
              (if (address-sanitized-p pid)
                  (skip "no bound on resident memory under AddressSanitizer, whose quarantine ~
keeps freed memory on purpose (~D kB after 1,000 requests, ~D kB after 10,000); the answers ~
were checked"
                        first last)
                  (is (<= last (* 1.1 first))
                      "resident memory ~D kB after 1,000 requests, ~D kB after 10,000"
                      first last))))))
      (delete-file bodies))))

(test serve-answers-while-500-connections-idle
  "With 500 connections open that each sent half a request line, the
server still answers /health (on new connections), and holds the 500."
  (skip-unless-file (*serve-load*)
    (with-server (port (serve-file))
      (multiple-value-bind (code line)
          (serve-load port "--idle" "500" "--requests" "50" "--concurrency" "2" "--deadline" "60")
        (is (eql 0 code) "~A" line)
        (is (search "idle 500 open 500" line) "~A" line)))))
