;;;; test-serve.lisp - `rontolisp serve' (lisp/jobs/serve.lisp, prims/http.c)
;;;; in a child process on a free loopback port: llama-server's shapes, the
;;;; numbers of `tokenize', `embed --json' and `decide --json' bit for bit,
;;;; the API key, abuse that must not stop it, and SIGINT/SIGTERM ending it
;;;; with status 0.

(in-package "RONTOLISP-TESTS")

(def-suite serve :in all :description "The HTTP server.")
(in-suite serve)

;;; A server in a child process.

(defun call-with-server (args function)
  "Run `rontolisp serve --port 0 ARGS', call FUNCTION with the port it
announces on its first line (the test fails when none came within 60 s),
then stop it with SIGTERM; answer FUNCTION's value and the server's exit
status (NIL when a signal ended it), its standard error as a third value."
  (let* ((out (tmp-path "serve-out")) (err (tmp-path "serve-err"))
         (process (run-child *exe* (append (list "serve") args (list "--port" "0"))
                             :input nil :output out :error err :if-output-exists :supersede
                             :if-error-exists :supersede :wait nil))
         (deadline (+ (get-internal-real-time) (* 60 internal-time-units-per-second)))
         (value nil) (code nil) (log ""))
    (unwind-protect
         (let* ((line (wait-for-line out "listening on http://127.0.0.1:" deadline))
                (port (and line (parse-integer line :start (1+ (position #\: line :from-end t))
                                                    :junk-allowed t))))
           (unless port
             (error "serve announced no port within 60 s: ~A"
                    (ignore-errors (read-file-string err))))
           (setf value (funcall function port))
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

(defun http-raw (port request &key (deadline 30) (close t))
  "Send REQUEST (a string of Latin-1 characters, one a byte) on a new
connection to 127.0.0.1:PORT and answer what comes back until the server
closes the connection (or, after DEADLINE seconds, what came until then),
and :CLOSED or :DEADLINE, which of the two ended the wait.  With CLOSE
false the connection is closed at once, without reading."
  (require 'sockets)
  (flet ((sym (name) (find-symbol name "SB-BSD-SOCKETS")))
    (let* ((socket (make-instance (sym "INET-SOCKET") :type :stream :protocol 6))
           (end (+ (get-internal-real-time) (* deadline internal-time-units-per-second))))
      (funcall (sym "SOCKET-CONNECT") socket #(127 0 0 1) port)
      (let ((s (funcall (sym "SOCKET-MAKE-STREAM") socket :input t :output t :buffering :full
                                                          :element-type 'character
                                                          :external-format :latin-1)))
        (unwind-protect
             (progn
               ;; A server that refuses a request early may close before
               ;; reading all of it: what it answered is still read.
               (handler-case (progn (write-string request s) (finish-output s))
                 (stream-error () nil))
               (when close
                 (let ((how :deadline))
                   (values
                    (with-output-to-string (out)
                      (loop (let ((c (ignore-errors (read-char-no-hang s nil :eof))))
                              (cond ((or (eq c :eof) (and (null c) (not (open-stream-p s))))
                                     (setf how :closed)
                                     (return))
                                    (c (write-char c out))
                                    ((> (get-internal-real-time) end) (return))
                                    (t (sleep 0.005))))))
                    how))))
          (ignore-errors (close s :abort t)))))))

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

;;; The numbers of the command line.

(test serve-tokenize-equals-tokenize
  "/tokenize answers `tokenize --json''s ids (add_special true) and
`tokenize --no-special''s (the default, as llama-server's); /detokenize
gives the text back; with_pieces gives each token's text."
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
        (is (every (lambda (p) (integerp (gethash "id" p))) (gethash "tokens" json)))))))

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

;;; Abuse.

(test serve-survives-abuse
  "Each bad request gets its status or a closed connection, and the server
goes on answering: a malformed request line, a 1 MB header, a body over
--max-body (with a length and chunked), invalid JSON, invalid UTF-8, JSON nested 100,000
deep, a text over the model's context (400 naming both numbers), clients
that leave mid-request, a connection left idle (closed after --timeout)."
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
      (is (or (null status) (<= 400 status 499)) "a 1 MB header: ~S ~S" status text))
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
    ;; One that sends half a header and waits: closed after --timeout.
    (multiple-value-bind (answer how) (http-raw port "GET /health HTTP/1.1" :deadline 60)
      (is (eq :closed how) "an idle connection stayed open: ~S" answer))
    (is (eql 200 (http port "POST" "/tokenize" :body "{\"content\": \"still here\"}")))
    (is (eql 200 (http port "GET" "/health")))))
