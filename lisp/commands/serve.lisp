;;;; commands/serve.lisp - `rontolisp serve': its command line; the work
;;;; is in jobs/serve.lisp.

(in-package "COMMAND-LINE")

(defun read-api-key-file (path)
  "The API key in the file PATH: its first line, without the line's end
and surrounding blanks; FILE-IO-ERROR when that is empty."
  (let* ((text (%utf8-string (read-file-octets path :what "a file holding an API key")))
         (key (string-trim '(#\Space #\Tab #\Return)
                           (subseq text 0 (position #\Newline text)))))
    (when (zerop (length key))
      (file-io-error path "expected an API key on its first line, found none"))
    key))

(define-command "serve" (file)
    (:usage "FILE.gguf [--host ADDR] [--port N] [--threads N] [--parallel N] [--queue N] [--api-key KEY | --api-key-file F] [--timeout S] [--max-body BYTES] [--metrics]"
     :summary "answer HTTP requests with a GGUF file's model, in llama-server's shapes"
     :details "Loads the model once and answers, in llama-server's request and response
shapes: GET /health, /props, /v1/models, /metrics (with --metrics); POST
/tokenize, /detokenize, /embedding, /v1/embeddings, and /decide (one
question as `decide' reads them, or {\"questions\": [...]}).  The numbers are
those of `tokenize', `embed --json' and `decide --json' for the same file
and input.  The first line on standard output is \"listening on
http://ADDR:PORT\".  Errors are answered {\"error\": {\"code\", \"message\",
\"type\"}}: 400 for a request that cannot be answered (naming why), 401
without the API key (every path but /health), 404, 413 for a body over
--max-body, 503 when the queue is full.  SIGINT or SIGTERM stops accepting,
finishes the requests in flight and exits 0.  --threads (a global flag) is
the kernels' threads per request.  See doc/serve.md."
     :options ((host "--host ADDR" :default "127.0.0.1"
                     :help "the address to listen on (default 127.0.0.1; 0.0.0.0 or ::
for every interface)")
               (port "--port N" :parse (integer-parser :min 0 :max 65535) :default 8080
                     :help "the TCP port (default 8080; 0 picks a free one)")
               (parallel "--parallel N" :parse (integer-parser :min 1 :max 64) :default 4
                         :help "requests answered at once, by as many Lisp workers (default 4)")
               (queue "--queue N" :parse (integer-parser :min 1 :max 65536) :default 64
                      :help "requests waiting for a worker before a 503 (default 64)")
               (api-key "--api-key KEY" :help "require Authorization: Bearer KEY")
               (api-key-file "--api-key-file F" :help "the API key is the first line of F")
               (timeout "--timeout S" :parse (integer-parser :min 1 :max 86400) :default 600
                        :help "seconds a connection may stay idle (default 600)")
               (max-body "--max-body BYTES" :parse (integer-parser :min 1 :max (expt 2 34))
                         :default (* 16 1024 1024)
                         :help "the largest request body (default 16 MiB)")
               (metrics "--metrics" :help "answer GET /metrics (Prometheus text)")))
  (when (and api-key api-key-file)
    (usage-error "expected --api-key or --api-key-file, found both"))
  (when (and api-key (zerop (length api-key)))
    (usage-error "--api-key expects a key, found an empty one"))
  (serve file :host host :port port :parallel parallel :queue queue
              :api-key (if api-key-file (read-api-key-file api-key-file) api-key)
              :timeout timeout :max-body max-body :metrics metrics)
  0)
