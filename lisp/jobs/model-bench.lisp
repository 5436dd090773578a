;;;; model-bench.lisp - the encoder measured: llama.cpp's own encoder run on
;;;; the same file as the reference (llama-encode), how far two hidden states
;;;; are apart, and `rontolisp bench --model | --random' for the encoder
;;;; (run-model-bench): latency by weight format, activations and threads
;;;; against llama.cpp, and each format's error against the F32 weights.

(in-package "COMMAND-LINE")

;;; llama.cpp as the reference: tools/llama_embed runs llama.cpp's own
;;; encoder (its libraries, dlopened) in a child process, so that a crash in
;;; it cannot take rontolisp down.

(defun llama-library-place ()
  "Where llama.cpp's libraries are looked for: RL_LLAMA_LIB's directory
when it is set (it names one of them), else build/cache/llama/."
  (let ((lib (ext:getenv "RL_LLAMA_LIB")))
    (if (and lib (plusp (length lib)))
        (directory-namestring (merge-pathnames lib))
        "build/cache/llama/")))

(defun llama-library-directory (&optional (library "libllama.v0.5.0.so"))
  "The directory of llama.cpp's libraries (LLAMA-LIBRARY-PLACE), or NIL
when LIBRARY (libllama by default) is not there."
  (let ((dir (llama-library-place)))
    (and (probe-file (merge-pathnames library dir))
         (namestring (truename dir)))))

(defun llama-embed-program ()
  "The llama_embed tool: RL_LLAMA_EMBED when set, else built beside the
executable (build/tools/), else build/tools/ of the current directory (a
stock ECL running the code); NIL when none exists."
  (let* ((exe (ignore-errors (truename "/proc/self/exe")))
         (env (ext:getenv "RL_LLAMA_EMBED"))
         (found (find-if #'probe-file
                         (remove nil (list (and env (plusp (length env)) env)
                                           (and exe (merge-pathnames "tools/llama_embed" exe))
                                           "build/tools/llama_embed")))))
    (and found (namestring (truename found)))))

(defun llama-reference-missing ()
  "NIL when llama.cpp can be run as the reference (its libraries and
tools/llama_embed are found), else what the table says in its place,
naming the environment variable that finds the missing piece."
  (cond ((not (llama-library-directory))
         (format nil "not run: its libraries were not found (set RL_LLAMA_LIB to the path of ~
libllama.v0.5.0.so, or run from a source tree that has build/cache/llama/)"))
        ((not (llama-embed-program))
         "not run: tools/llama_embed was not found (set RL_LLAMA_EMBED to its path)")))

(defun ratio-text (ratio llama one-thread)
  "The ratio column's text for RATIO (NIL: -), our time over llama.cpp's
time LLAMA; marked with * (noise) when LLAMA, a time on more threads than
one, is slower than ONE-THREAD, llama.cpp's own 1-thread time on the same
work, since then the reference was disturbed, not faster or slower."
  (cond ((null ratio) "-")
        ((and one-thread (> llama one-thread)) (format nil "~,2Fx*" ratio))
        (t (format nil "~,2Fx" ratio))))

(defparameter *ratio-noise-note*
  "*: noise, llama.cpp took longer than on 1 thread; the ratio says little"
  "The line under a table in which RATIO-TEXT marked a ratio.")

(defparameter *llama-encode-deadline* 1800
  "Seconds llama.cpp's encoder (tools/llama_embed, a child process) may
take for one LLAMA-ENCODE call before it is killed and an error signalled.")

(defun run-with-deadline (program args deadline what &rest keys)
  "Run PROGRAM with ARGS (EXT:RUN-PROGRAM's KEYS) and wait for it at most
DEADLINE seconds: answers its exit code, or (:signaled n).  At the deadline
it is killed (SIGKILL) and reaped and RONTOLISP-ERROR names WHAT."
  (let ((process (nth-value 2 (apply #'ext:run-program program args :wait nil keys)))
        (end (+ (get-internal-real-time) (* deadline internal-time-units-per-second)))
        (pause 0.001))
    (loop
      (multiple-value-bind (how code) (ext:external-process-wait process nil)
        (case how
          (:exited (return code))
          (:signaled (return (list how code)))))
      (when (> (get-internal-real-time) end)
        (ext:terminate-process process t)
        (ext:external-process-wait process t)
        (rontolisp-error 'run-with-deadline "expected ~A to end within ~D s, found it running: killed"
                         what deadline))
      (sleep pause)
      (setf pause (min 0.05 (* 2 pause))))))

(defun llama-encode (file sequences &key (threads 1) (repeat 1))
  "llama.cpp's final hidden states of the GGUF FILE for each token sequence
of SEQUENCES (pooling none): a list of (microseconds . n x d matrix), the
microseconds the median of REPEAT calls of llama_encode with THREADS
threads.  NIL when llama.cpp's libraries or the tool are missing; a refusal
by llama.cpp signals RONTOLISP-ERROR with its message."
  (let ((dir (llama-library-directory)) (program (llama-embed-program)))
    (when (and dir program)
      (let* ((base (format nil "llama-~D" (random 1000000000)))
             (in (scratch-file-path (concatenate 'string base ".in")))
             (out (scratch-file-path (concatenate 'string base ".out")))
             (err (scratch-file-path (concatenate 'string base ".err"))))
        (unwind-protect
             (progn
               (with-open-file (s in :direction :output :if-exists :supersede)
                 (dolist (ids sequences) (format s "~{~D~^,~}~%" ids)))
               (let ((code (run-with-deadline
                            program (list dir (native-namestring file)
                                          (princ-to-string threads)
                                          (princ-to-string repeat))
                            *llama-encode-deadline* "llama.cpp's encoder (tools/llama_embed)"
                            :input in :output out :error err
                            :if-output-exists :supersede
                            :if-error-exists :supersede)))
                 (unless (eql code 0)
                   (rontolisp-error 'llama-encode "~A: llama.cpp failed (exit ~A): ~A" file code
                                    (string-trim '(#\Newline)
                                                 (%utf8-string (read-file-octets (user-namestring err))))))
                 (loop for line in (split-lines (%utf8-string (read-file-octets (user-namestring out))))
                       when (plusp (length line))
                         collect (let* ((obj (parse-json line))
                                        (rows (gethash "embeddings" obj)))
                                   (cons (gethash "us" obj)
                                         (make-array (list (length rows) (gethash "n_embd" obj))
                                                     :element-type 'single-float
                                                     :initial-contents
                                                     (map 'list (lambda (r)
                                                                  (map 'list (lambda (x) (coerce x 'single-float)) r))
                                                          rows)))))))
          (mapc #'remove-scratch-file (list in out err)))))))

(defun hidden-state-error (a b)
  "How far the n x d hidden states A are from the reference B: (values
max-abs-difference max-abs-of-B cosine), the cosine of the flattened
arrays, all in double-float."
  (let ((fa (make-array (array-total-size a) :element-type 'single-float :displaced-to a))
        (fb (make-array (array-total-size b) :element-type 'single-float :displaced-to b))
        (diff 0d0) (big 0d0) (ab 0d0) (aa 0d0) (bb 0d0))
    (dotimes (i (length fa))
      (let ((x (float (aref fa i) 1d0)) (y (float (aref fb i) 1d0)))
        (setf diff (max diff (abs (- x y))) big (max big (abs y)))
        (incf ab (* x y)) (incf aa (* x x)) (incf bb (* y y))))
    (values diff big (if (or (zerop aa) (zerop bb)) 0d0 (/ ab (sqrt (* aa bb)))))))

;;; `rontolisp bench --model FILE | --random NAME --tokens N': the encoder's
;;; latency per sequence by weight format, activations and threads, against
;;; llama.cpp on the same file and threads, and each format's error against
;;; the F32 weights -- the seed chapter's table, measured.

(defun formatted-weight (name data format &optional outliers)
  "The tensor NAME (its values DATA) as the converter's type policy stores it
in a file of FORMAT (:f32 :f16 :q8_0): 1-D tensors F32, with Q8_0 the token
embedding F16 and rows that are not multiples of 32 F16.  OUTLIERS, a hash
table from tensor names to outlier columns, gives a Q8_0 matrix it names
the outlier-aware scales of doc/outliers.md."
  (let ((f32 (embedding-as-single data)))
    (cond ((or (= 1 (array-rank f32)) (eq format :f32)) f32)
          ((or (eq format :f16) (string= name "token_embd.weight")
               (plusp (mod (array-dimension f32 1) 32)))
           (make-float16-array f32))
          (t (quantize f32 'q8-0 :outliers (and outliers (gethash name outliers)))))))

(defun head-tensor-predicate (enc)
  "A function of a tensor name answering true for the tensors of the GGUF
file object ENC's decision head (doc/decision.md): the blocks from the
encoder's count on (block_count less decision.block_count), token_types
and cls.*.  It answers false for every name when ENC has no head."
  (let* ((head (or (gguf:value enc "modern-bert.decision.block_count") 0))
         (first (- (or (gguf:value enc "modern-bert.block_count") 0) head)))
    (lambda (name)
      (and (plusp head)
           (or (string= name "token_types.weight")
               (and (> (length name) 4) (string= "cls." name :end2 4))
               (let ((n (and (> (length name) 4) (string= "blk." name :end2 4)
                             (parse-integer name :start 4 :junk-allowed t))))
                 (and n (>= n first))))))))

(defun file-in-format (enc format &optional outliers head-format)
  "An in-memory copy of the GGUF file object ENC with its encoder matrices
in FORMAT (with OUTLIERS, see FORMATTED-WEIGHT, as `convert --type q8_0
--outlier-aware' writes them); a decision head's tensors keep the types the
file holds them in, or with HEAD-FORMAT (:f32 :f16) its matrices take that
type (the converter's --head-type).  The copy is one file:
ENC may be a shard set (GGUF:READ :SHARDS), whose split keys it leaves out."
  (gguf:make-file
     :metadata (mapcar (lambda (e)
                         (if (string= (first e) "general.file_type")
                             (list (first e) :u32 (file-type-id format))
                             e))
                       (remove "general.alignment" (gguf:without-split-keys (gguf:metadata enc))
                               :key #'first :test #'string=))
     :tensors (loop with head-p = (head-tensor-predicate enc)
                    for info in (gguf:tensor-infos enc)
                    for name = (gguf:tensor-info-name info)
                    collect (list name (if (funcall head-p name)
                                           (if head-format
                                               (formatted-weight name (gguf:tensor enc name)
                                                                 head-format)
                                               (gguf:tensor enc name))
                                           (formatted-weight name (gguf:tensor enc name) format
                                                             outliers))
                                  :dims (gguf:tensor-info-dims info)))))

;;; The reference of `eval --reference' and `bench --model --reference': the
;;; model a file was made from, a GGUF file or the model directory itself.

(defun read-reference (path &key encoder-only)
  "The GGUF file object of the reference PATH: a GGUF file (the first shard
of a set stands for the set), or a Laya or Hugging Face ModernBERT directory
(CONVERT-DIRECTORY), converted with F32 matrices to a temporary file first
(ENCODER-ONLY leaves its decision head out, as for a file converted with
--encoder-only).  A second value is that temporary file, for
CLOSE-REFERENCE to delete."
  (if (eq (path-kind path) :directory)
      (let ((temporary (scratch-file-path "reference.gguf")))
        (handler-bind ((error (lambda (c)
                                (declare (ignore c))
                                (remove-scratch-file temporary))))
          (let ((*standard-output* *error-output*))
            (convert-directory path temporary :type :f32 :head-type :f32
                                              :encoder-only encoder-only))
          (values (gguf:read temporary) temporary)))
      (values (gguf:read path :shards t) nil)))

(defun close-reference (f temporary)
  "Close the reference F of READ-REFERENCE and delete its TEMPORARY file."
  (gguf:close f)
  (when temporary (remove-scratch-file temporary)))

(defun model-difference (reference file)
  "The first way the GGUF file object FILE is not the model REFERENCE is, as
a phrase, or NIL when they agree: general.architecture, then each
tensor of REFERENCE in order (present in FILE, with the same shape), then
any tensor of FILE that REFERENCE lacks.  Types may differ: that is what
a reference is for."
  (let ((a (gguf:value reference "general.architecture")) (b (gguf:value file "general.architecture")))
    (unless (equal a b)
      (return-from model-difference
        (format nil "general.architecture ~:[(none)~;~:*~S~] in the reference, ~:[(none)~;~:*~S~] in the file" a b))))
  (dolist (info (gguf:tensor-infos reference))
    (let* ((name (gguf:tensor-info-name info))
           (other (find name (gguf:tensor-infos file) :key #'gguf:tensor-info-name :test #'string=)))
      (cond ((null other)
             (return-from model-difference
               (format nil "the tensor ~A is in the reference, not in the file" name)))
            ((not (equal (gguf:tensor-info-shape info) (gguf:tensor-info-shape other)))
             (return-from model-difference
               (format nil "the tensor ~A is ~{~D~^ x ~} in the reference, ~{~D~^ x ~} in the file"
                       name (gguf:tensor-info-shape info) (gguf:tensor-info-shape other)))))))
  (let ((extra (find-if-not (lambda (info)
                              (find (gguf:tensor-info-name info) (gguf:tensor-infos reference)
                                    :key #'gguf:tensor-info-name :test #'string=))
                            (gguf:tensor-infos file))))
    (and extra (format nil "the tensor ~A is in the file, not in the reference"
                       (gguf:tensor-info-name extra)))))

(defun check-same-model (reference file reference-label file-label)
  "Signal RONTOLISP-ERROR naming REFERENCE-LABEL, FILE-LABEL and the first
difference (MODEL-DIFFERENCE) unless the GGUF file objects REFERENCE and
FILE hold the same model."
  (let ((difference (model-difference reference file)))
    (when difference
      (rontolisp-error 'reference "~A: expected the same model as the reference ~A (the same ~
architecture, tensor names and shapes), found a difference: ~A" file-label reference-label difference))))

(defun encoder-only-file (enc)
  "The GGUF file object ENC without its decision head, as `convert
--encoder-only' writes the same model: the head's tensors, the
modern-bert.decision.* keys and tokenizer.ggml.token_type_count left out,
block_count the encoder's, feed_forward_length the encoder's blocks' (one
u32 when they agree), general.size_label the encoder's parameters.  llama.cpp refuses the head; it loads this.  ENC
itself when it has no head."
  (let* ((head (or (gguf:value enc "modern-bert.decision.block_count") 0))
         (layers (- (or (gguf:value enc "modern-bert.block_count") 0) head))
         (head-p (head-tensor-predicate enc))
         (tensors (loop for info in (gguf:tensor-infos enc)
                        for name = (gguf:tensor-info-name info)
                        unless (funcall head-p name)
                          collect (list name (gguf:tensor enc name)
                                        :dims (gguf:tensor-info-dims info)))))
    (if (zerop head)
        enc
        (gguf:make-file
         :metadata (loop for e in (gguf:metadata enc)
                         for key = (first e)
                         unless (or (search "modern-bert.decision." key :end2 (min (length key) 21))
                                    (string= key "tokenizer.ggml.token_type_count"))
                           collect (cond ((string= key "modern-bert.block_count")
                                          (list key (second e) layers))
                                         ((and (string= key "modern-bert.feed_forward_length")
                                               (vectorp (third e)))
                                          (let ((ff (subseq (third e) 0 layers)))
                                            (if (every (lambda (x) (= x (aref ff 0))) ff)
                                                (list key :u32 (aref ff 0))
                                                (list key (second e) ff))))
                                         ((string= key "general.size_label")
                                          (list key :string
                                                (size-label (loop for (nil data) in tensors
                                                                  sum (reduce #'* (packed-dimensions data))))))
                                         (t e)))
         :tensors tensors))))

(defparameter *model-bench-rows*
  '(("F16 (f32 compute)" :f16 :q8) ("Q8_0 :q8" :q8_0 :q8) ("Q8_0 :q8x2" :q8_0 :q8x2)
    ("F32" :f32 :q8))
  "The rows of the encoder benchmark: label, file format, activations.")

(defun stored-only-types (f)
  "The ggml names of the types of F's encoder matrices that the benchmark's
own copies do not store (Q4_K, Q6_K, ... as llama-quantize writes them), in
file order, or NIL.  The file's own row runs them in their own bits (each
type's row product, doc/products.md §6)."
  (let ((head-p (head-tensor-predicate f)))
    (remove-duplicates
     (loop for info in (gguf:tensor-infos f)
           for type = (gguf:tensor-info-type info)
           when (and (= 2 (length (gguf:tensor-info-dims info)))
                     (not (funcall head-p (gguf:tensor-info-name info)))
                     (not (member type '("F32" "F16" "BF16" "Q8_0") :test #'string=)))
             collect type)
     :test #'string= :from-end t)))

(defun median (xs)
  "The median of the non-empty list of reals XS (the upper of the middle
two for an even count)."
  (nth (floor (length xs) 2) (sort (copy-list xs) #'<)))

(defun median-microseconds (thunk reps)
  "The median over REPS rounds of THUNK's wall time per call, in
microseconds, on the monotonic nanosecond clock: a round calls THUNK until
100 ms have passed and divides, so that a call of a few microseconds is
timed over many."
  (flet ((now () (%bench-now-ns)))
    ;; A call of half a second or more is timed once: rounds would only
    ;; make a slow row slower to report.
    (median (loop repeat reps
                  for first = t then nil
                  for time = (let ((t0 (now)) (calls 0))
                               (loop do (funcall thunk) (incf calls)
                                     until (>= (- (now) t0) 100000000))
                               (/ (- (now) t0) (* 1d3 calls)))
                  collect time
                  until (and first (>= time 5d5))))))

(defun bench-token-ids (n vocab)
  "A fixed token sequence of length N below VOCAB."
  (loop for i below n collect (mod (+ 3 (* i 37)) vocab)))

(defun run-model-bench (&key file ((:reference reference-path)) random token-counts (thread-counts '(1 2)) (reps 3)
                          (stream *standard-output*) svg)
  "Time MODEL:ENCODE on the encoder of FILE (or of a random model of the
preset RANDOM) stored as F16, Q8_0 and F32 (encoder-only copies: a
decision head is left out), and as FILE stores it when its matrices hold
other types (Q4_K etc., a row named after them), for each token count of
TOKEN-COUNTS and thread count of THREAD-COUNTS, with llama.cpp on the same
file and threads where its libraries are present; print the table and the
error of each format against F32 (max abs, cosine, for the first token
count) on STREAM.  With REFERENCE (the model FILE was made from, a GGUF
path or a model directory, READ-REFERENCE; CHECK-SAME-MODEL) the F16, Q8_0 and F32 copies are made from
REFERENCE's weights, the errors are against REFERENCE widened to F32, and
FILE as stored always gets a row, \"file as stored\".  With SVG (a path)
also the picture of the times (MODEL-BENCH-SVG).  Answers the rows as a
list of plists."
  (let* ((source (if file (gguf:read file :shards t) (random-model random :type :f32 :encoder-only t)))
         (original nil) (original-temporary nil)
         (label (or file (format nil "random ~A" random)))
         (own (and file (stored-only-types source)))
         (stored-row (cond (reference-path
                            (setf (values original original-temporary)
                                  (read-reference reference-path
                                                  :encoder-only (not (decision-head-p source))))
                            "file as stored")
                           (own (format nil "~{~A~^+~} (as stored)" own))))
         (files '())
         (old-threads (threads))
         (rows '()))
    (unwind-protect
         (progn
           (when original (check-same-model original source reference-path file))
           ;; each copy entered in FILES before it is written, so that the
           ;; cleanup below removes it whatever fails after
           (dolist (format (if stored-row '(:f32 :f16 :q8_0 :file) '(:f32 :f16 :q8_0)))
             (let ((path (scratch-file-path (format nil "bench-~(~A~).gguf" format))))
               (push (cons format path) files)
               ;; llama.cpp refuses a decision head's tensors.
               (gguf:write path (encoder-only-file
                                 (if (eq format :file)
                                     source
                                     (file-in-format (or original source) format))))))
           (setf files (reverse files))
           (let* ((encoders (loop for (format . path) in files
                                  collect (cons format (model:load path))))
                  (vocab (getf (model:hyperparameters (cdr (first encoders))) :vocab-size))
                  (missing (llama-reference-missing))
                  (llama-p (not missing))
                  (one-thread (make-hash-table :test 'equal))
                  (noise nil)
                  (ids0 (bench-token-ids (first token-counts) vocab))
                  (reference (model:encode (cdr (assoc :f32 encoders)) ids0))
                  (tiles0 (multiple-value-list (%matmul-q8-tiles))))
             (format stream "~&encoder benchmark: ~A, µs per sequence (median of ~D)~@[, ~
llama.cpp ~A~]~%" (escape-control label) reps
                     (or missing "on the same file and threads"))
             (format stream "~18A ~7@A ~7@A ~12@A ~12@A ~9@A ~11@A ~12@A~%" "format" "tokens" "threads"
                     "µs" "llama.cpp µs" "ratio" "max |err|" "cosine")
             (dolist (row (if stored-row
                              (append *model-bench-rows* (list (list stored-row :file :q8)))
                              *model-bench-rows*))
               (destructuring-bind (name format activations) row
                 (let* ((e (cdr (assoc format encoders)))
                        (path (cdr (assoc format files))))
                   (multiple-value-bind (err big cos)
                       (hidden-state-error (model:encode e ids0 :activations activations) reference)
                     (declare (ignore big))
                     (dolist (n token-counts)
                       (let ((ids (bench-token-ids n vocab)))
                         (dolist (th thread-counts)
                           (setf (threads) th)
                           (let* ((us (median-microseconds
                                       (lambda () (model:encode e ids :activations activations))
                                       reps))
                                  (llama (and llama-p
                                              (car (first (llama-encode path (list ids) :threads th
                                                                                        :repeat reps)))))
                                  (ratio (and llama (/ us llama)))
                                  (one (and llama (/= th 1) (gethash (list name n) one-thread))))
                             (when (and llama (= th 1))
                               (setf (gethash (list name n) one-thread) llama))
                             (when (and one (> llama one)) (setf noise t))
                             (format stream "~18A ~7D ~7D ~12,1F ~12@A ~9@A ~11,3,2,,,,'eE ~12,8F~%"
                                     name n th us (if llama (format nil "~,1F" llama) "-")
                                     (ratio-text ratio llama one) err cos)
                             (finish-output stream)
                             (push (list :format name :weights format :tokens n :threads th
                                         :us us :llama-us llama
                                         :ratio ratio :max-abs-error err :cosine cos)
                                   rows)))))))))
             (format stream "ratio: our time over llama.cpp's (below 1: faster); error: hidden ~
states against the F32 file's~@[ (made from the reference ~A)~], ~D tokens~%~@[~A~%~]"
                     (and reference-path (escape-control reference-path)) (first token-counts)
                     (and noise *ratio-noise-note*))
             (destructuring-bind (whole lanes)
                 (mapcar #'- (multiple-value-list (%matmul-q8-tiles)) tiles0)
               (when (plusp (+ whole lanes))
                 (format stream "Q8_0 :q8 products: ~D of ~D tiles summed by whole blocks, ~
the rest lane by lane (the same bits; see vec:matmul)~%" whole (+ whole lanes))))))
      (setf (threads) old-threads)
      (dolist (entry files) (remove-scratch-file (cdr entry)))
      (when original (close-reference original original-temporary))
      (when file (gguf:close source)))
    (setf rows (nreverse rows))
    (when svg
      (model-bench-svg svg (format nil "encoder benchmark: ~A" label) rows))
    rows))

(defun llama-noise-p (row rows)
  "True when ROW's llama.cpp time, on more threads than one, is above
llama.cpp's own 1-thread time for the same format and tokens among ROWS
(the rows of the encoder or the questions benchmark; the latter's have no
tokens): the noise RATIO-TEXT marks with *."
  (let ((one (find-if (lambda (r) (and (= 1 (getf r :threads))
                                       (string= (getf r :format) (getf row :format))
                                       (eql (getf r :tokens) (getf row :tokens))))
                      rows)))
    (and (/= 1 (getf row :threads)) (getf row :llama-us) one (getf one :llama-us)
         (> (getf row :llama-us) (getf one :llama-us)))))

(defun model-bench-svg (path title rows)
  "The picture of the encoder benchmark's ROWS (RUN-MODEL-BENCH's) at PATH:
a panel per thread count, µs per sequence against tokens on logarithmic
axes, a line per format and a dashed one per file llama.cpp ran (the
first of the rows on each file); a llama.cpp time that is noise
(LLAMA-NOISE-P) is a grey mark of its own, not a point of the line."
  (let ((formats (remove-duplicates (mapcar (lambda (r) (getf r :format)) rows)
                                    :test #'string= :from-end t))
        (llama-rows (remove-duplicates rows :key (lambda (r) (getf r :weights)) :from-end t)))
    (flet ((panel (th)
             (flet ((points (name key &optional (keep (constantly t)))
                      (loop for r in rows
                            when (and (= th (getf r :threads)) (string= name (getf r :format)))
                              collect (cons (getf r :tokens) (and (funcall keep r) (getf r key)))))
                    (clean (r) (not (llama-noise-p r rows))))
               (list :title (format nil "~D thread~:P" th)
                     :x-label "tokens per sequence" :y-label "µs per sequence" :x-log t :y-log t
                     :series (append
                              (loop for name in formats
                                    collect (list :name name :points (points name :us)))
                              (loop for r in llama-rows
                                    for name = (getf r :format)
                                    collect (list :name (format nil "llama.cpp, ~A"
                                                                (if (eq (getf r :weights) :file)
                                                                    name
                                                                    (subseq name 0 (position #\Space name))))
                                                  :dashed t :points (points name :llama-us #'clean)))
                              (list (list :name "llama.cpp noise (*)"
                                          :line nil :colour "#999999"
                                          :points (loop for r in llama-rows
                                                        append (points (getf r :format) :llama-us
                                                                       (lambda (r) (not (clean r))))))))))))
      (write-svg-figure
       path title
       (mapcar #'panel (remove-duplicates (mapcar (lambda (r) (getf r :threads)) rows) :from-end t))
       :what "encoder timings"))))
