;;;; lines.lisp - the line-by-line work of `tokenize', `embed' and `decide':
;;;; a file's lines read in bounded memory (or a pipe's, each answered as it
;;;; comes), token lists parsed, one question answered per line (on several
;;;; threads, in order: MAP-IN-ORDER), and embeddings written as
;;;; llama-embedding writes them (array, json, json+, .npy).  The model
;;;; answers; this file reads and prints.

(in-package "COMMAND-LINE")

;;; Texts from a file, one per line, in bounded memory.

(defparameter *max-line-bytes* (* 64 1024 1024)
  "The longest line a text file may hold (bytes).")

(defun lines-name (path)
  "How messages name the file of lines PATH: \"standard input\" for \"-\"."
  (if (equal path "-") "standard input" path))

(defun line-place (path number)
  "A function answering how messages name line NUMBER of the file of lines
PATH (\"F line 3\"), made only when a message needs it: a FORMAT per line
was most of the time of `tokenize --file')."
  (lambda () (format nil "~A line ~D" (lines-name path) number)))

(defun newline-position (block start end)
  "The index of the first newline byte of BLOCK from START below END, or
NIL (an open-coded loop: POSITION took a third of `tokenize --file')."
  (declare (type (simple-array (unsigned-byte 8) (*)) block) (fixnum start end)
           (optimize (speed 3) (safety 0)))
  (loop for i fixnum from start below end
        when (= 10 (aref block i)) return i))

(defun map-file-lines (fn path &key dash-is-stdin too-long flush)
  "Call FN on the bytes of each line of the file PATH (an (unsigned-byte 8)
vector, without its newline) and the line's number, reading the file in
blocks: memory is bounded by the longest line (at most *MAX-LINE-BYTES*,
else FILE-IO-ERROR; with TOO-LONG, a function, a longer line is skipped to
its newline without being kept and TOO-LONG is called with its number and
the limit instead of FN).  A final line without a newline counts; an empty
file has no lines.  With DASH-IS-STDIN, PATH \"-\" is the standard input;
PATH may be a pipe or device too (/dev/stdin).  Each read takes what the
input holds, without waiting for a block to fill, and FLUSH (an output
stream) is flushed before each read: a program that writes a line and waits
for its answer gets it.  Answers the number of lines."
  (let* ((stdin (and dash-is-stdin (equal path "-")))
         (name (if stdin (lines-name path) (absolute-namestring path)))
         (fd (if stdin 0 (open-input-fd name :what "a file of texts" :streams t))))
    (unwind-protect
      (let ((block (make-array 65536 :element-type '(unsigned-byte 8)))
            (line (make-array 4096 :element-type '(unsigned-byte 8)))
            (fill 0) (number 0) (pending nil) (skipping nil))
        (declare (type (simple-array (unsigned-byte 8) (*)) block line) (fixnum fill number))
        (flet ((emit ()
                 (if skipping
                     (funcall too-long (incf number) *max-line-bytes*)
                     (funcall fn (subseq line 0 fill) (incf number)))
                 (setf fill 0 pending nil skipping nil))
               (add (start end)
                 (let ((need (+ fill (- end start))))
                   (when skipping (return-from add))
                   (when (> need *max-line-bytes*)
                     (unless too-long
                       (file-io-error name "line ~D: expected at most ~D bytes, found more"
                                      (1+ number) *max-line-bytes*))
                     (setf skipping t pending t fill 0)
                     (return-from add))
                   (when (> need (length line))
                     (let ((bigger (make-array (min *max-line-bytes* (max need (* 2 (length line))))
                                               :element-type '(unsigned-byte 8))))
                       (replace bigger line :end2 fill)
                       (setf line bigger)))
                   (replace line block :start1 fill :start2 start :end2 end)
                   (setf fill need pending t)))
               (next ()
                 (when flush (finish-output flush))
                 (multiple-value-bind (n message) (%read-some fd block)
                   (or n (file-io-error name "~A" message)))))
          (loop for n fixnum = (next)
                while (plusp n)
                do (loop with start fixnum = 0
                         for nl = (newline-position block start n)
                         do (add start (or nl n))
                            (unless nl (return))
                            (emit)
                            (setf start (1+ nl))
                            (when (>= start n) (return))))
          (when (and pending (or skipping (plusp fill)))
            (emit))
          number))
      (unless stdin (%close-fd fd)))))

;;; `rontolisp tokenize'.

(defun write-ids-line (ids stream)
  "Write the ids IDS separated by spaces and a newline to STREAM (from C:
FORMAT per id was most of the command's time)."
  (write-numbers ids stream)
  (write-newline stream))

;;; `rontolisp bench --tokenizer': the tokenizer's throughput.

(defun run-tokenizer-bench (file text-file &key (rounds 3) (stream *standard-output*))
  "Time the tokenizer of FILE (a GGUF or a tokenizer.json) on every line of
TEXT-FILE (add-special off, special tokens parsed), one thread: a first
pass with an empty cache of pieces, then ROUNDS passes whose median is the
warm figure.  Prints MB/s (of the lines' bytes) and tokens/s to STREAM,
progress to standard error; answers a plist of the figures."
  (let* ((tok (model:load-tokenizer file))
         (lines (let ((acc '()))
                  (map-file-lines (lambda (octets number) (declare (ignore number)) (push octets acc))
                                  text-file)
                  (coerce (nreverse acc) 'simple-vector)))
         (bytes (reduce #'+ lines :key #'length))
         (tokens 0))
    (when (zerop bytes)
      (file-io-error text-file "expected text to tokenize, found ~:[only empty lines~;an empty file~]"
                     (zerop (length lines))))
    (flet ((pass ()
             (let ((start (get-internal-real-time)) (n 0))
               (declare (fixnum n))
               (loop for octets across lines
                     do (incf n (length (tokenize-octets tok octets nil t))))
               (setf tokens n)
               (max 1 (- (get-internal-real-time) start)))))
      (format *error-output* "~&bench: tokenizer ~A on ~A (~D lines, ~D bytes): cold pass~%"
              file text-file (length lines) bytes)
      (let* ((cold (pass))
             (warm (progn (format *error-output* "~&bench: ~D warm passes~%" rounds)
                          (let ((times (sort (loop repeat rounds collect (pass)) #'<)))
                            (nth (floor (length times) 2) times))))
             (unit internal-time-units-per-second))
        (flet ((row (name ticks)
                 (let ((seconds (/ ticks unit)))
                   (format stream "~&~12A ~10,4F ~10,2F ~14D~%" name (float seconds 1d0)
                           (/ bytes seconds 1d6) (round tokens seconds)))))
          (format stream "~&tokenizer ~A: ~D tokens~%text ~A: ~D lines, ~D bytes, ~D tokens~%~%"
                  file (model:vocabulary-size tok) text-file (length lines) bytes tokens)
          (format stream "~12A ~10@A ~10@A ~14@A~%" "pass" "seconds" "MB/s" "tokens/s")
          (row "cold" cold)
          (row (format nil "warm (~D)" rounds) warm))
        (list :bytes bytes :tokens tokens
              :cold-seconds (/ cold unit 1d0) :warm-seconds (/ warm unit 1d0))))))

(defun parse-normalize (option string)
  "The --normalize value: llama-embedding's --embd-normalize numbers (-1,
0, 1, 2 or a larger P) or the names none, max-abs, taxicab, l2."
  (let ((named (cdr (assoc string '(("none" . -1) ("max-abs" . 0) ("taxicab" . 1) ("l2" . 2))
                           :test #'string-equal))))
    (or named
        (let ((n (ignore-errors (parse-integer string))))
          (and n (<= -1 n 1000) n))
        (usage-error "~A expects -1 or none, 0 or max-abs, 1 or taxicab, 2 or l2, or a p-norm ~
P up to 1000, found ~S" option string))))

(defun option-keyword (choice)
  "The keyword of an option value as spelled in its list (\"q8x2\" -> :Q8X2)."
  (intern (string-upcase choice) "KEYWORD"))

(defun parse-token-list (string where &optional encoder)
  "The token ids of STRING, integers separated by a comma or by blanks
(a comma may have blanks around it); WHERE names its source for the usage
error, which an empty place between commas (\"2,,3\", a leading or a
trailing comma) signals too.  Given ENCODER, ids that it cannot take (beyond
its vocabulary, more than its context) are refused naming WHERE."
  (flet ((blankp (c) (find c '(#\Space #\Tab #\Return)))
         (bad (what)
           (usage-error "~A: expected token ids (integers from 0) separated by commas, found ~A"
                        where what)))
    (let ((ids '()) (start 0) (n (length string)) (comma t) (any nil))
      (loop
        (loop while (and (< start n) (blankp (char string start))) do (incf start))
        (when (>= start n)
          (when (and comma any) (bad (format nil "nothing after the last comma in ~S" string)))
          (return))
        (cond ((char= #\, (char string start))
               (when comma (bad (format nil "an empty id before the comma at character ~D of ~S"
                                        start string)))
               (setf comma t)
               (incf start))
              (t
               (let* ((end (or (position-if (lambda (c) (or (blankp c) (char= c #\,)))
                                            string :start start)
                               n))
                      (id (ignore-errors (parse-integer string :start start :end end))))
                 (unless (and id (>= id 0))
                   (bad (format nil "~S" (subseq string start end))))
                 (push id ids)
                 (setf start end comma nil any t)))))
      (setf ids (nreverse ids))
      (when (and encoder ids)
        (check-token-ids encoder ids where))
      ids)))

(defun map-token-file (fn path encoder &key flush)
  "Call FN on the token ids of each non-blank line of the file PATH (UTF-8
text; \"-\" the standard input), read line by line (MAP-FILE-LINES, FLUSH
flushed before each read), each sequence one ENCODER can take
(PARSE-TOKEN-LIST); a refusal names PATH and the line, FILE-IO-ERROR names
PATH when it holds no token id at all."
  (let* ((any nil)
         (lines (map-file-lines (lambda (octets number)
                                  (let ((ids (parse-token-list (%utf8-string octets)
                                                               (format nil "~A line ~D"
                                                                       (lines-name path) number)
                                                               encoder)))
                                    (when ids
                                      (setf any t)
                                      (funcall fn ids))))
                                path :dash-is-stdin t :flush flush)))
    (unless any
      (file-io-error (lines-name path) "expected token ids, one sequence per line, found ~:[only ~
blank lines~;an empty file~]" (zerop lines)))))

(defun split-lines (text)
  "The lines of TEXT, split at each newline (SPLIT-AT-SEPARATOR)."
  (split-at-separator text (string #\Newline)))

;;; `rontolisp decide'.

(defun question-line-object (octets)
  "The JSON object of a line (OCTETS) of a questions file;
MODEL:QUESTION-ERROR when it is not JSON or not an object."
  (let ((object (handler-case (parse-json (%utf8-string octets))
                  (json-error (c)
                    (model:question-error "expected a question as a JSON object, found ~A"
                                          (rontolisp-error-message c))))))
    (unless (hash-table-p object)
      (model:question-error "expected a question as a JSON object, found ~A" (json-brief object)))
    object))

(defun decide-line (model octets number activations json stream)
  "Answer the question of one line (OCTETS, line NUMBER) of a questions
file on STREAM, as `decide' prints it."
  (let ((object (question-line-object octets)))
    (let ((question (parse-question object)))
      (multiple-value-bind (probabilities logits ids markers)
          (model:decide model question :activations activations)
        (if json
            (progn
              (write-json (list :object (cons "question" number) (cons "ids" ids)
                                (cons "markers" (coerce markers 'vector))
                                (cons "logits" logits) (cons "probabilities" probabilities))
                          stream)
              (write-newline stream))
            (let ((options (parsed-question-options question)))
              ;; no FORMAT per option: printing was a third of decide's time
              (format stream "question ~D (~A, ~D option~:P)~%" number
                      (parsed-question-type question) (length options))
              (loop for p across probabilities for o across options
                    do (write-string "  " stream)
                       (write-string (float-text p) stream)
                       (write-char #\Space stream)
                       (write-escaped (option-text o) stream :quotes nil)
                       (write-newline stream))))))))

;;; `rontolisp embed': the rows of an input.

(defun normalized-embeddings (encoder ids pooling normalize activations gelu)
  "The embedding rows of IDS as `embed' prints them: MODEL:ENCODE's answer
with POOLING (one row, or one per token for :none), each row scaled by
NORMALIZE-EMBEDDING with NORMALIZE; a simple vector of single-float
vectors."
  (map 'vector (lambda (row) (normalize-embedding row normalize))
       (embedding-rows (model:encode encoder ids :pooling pooling
                                                 :activations activations :gelu gelu))))

;;; llama-embedding's output formats (--embd-output-format, --npy).

(defun split-at-separator (text separator)
  "The parts of TEXT between occurrences of SEPARATOR (a non-empty string),
as llama-embedding splits its prompt at --embd-separator: every part kept,
an empty one too (TEXT itself when SEPARATOR does not occur)."
  (loop with start = 0
        for at = (search separator text :start2 start)
        collect (subseq text start (or at (length text)))
        while at
        do (setf start (+ at (length separator)))))

(defun cosine-similarity (a b)
  "The cosine similarity of the single-float vectors A and B as llama.cpp's
common_embd_similarity_cos computes it: each product in single-float,
summed in double-float, the sum over the product of the two norms' square
roots, rounded to single-float; 1 for two zero vectors, 0 when one is
zero."
  (declare (type (simple-array single-float (*)) a b))
  (let ((sum 0d0) (sum1 0d0) (sum2 0d0))
    (declare (type double-float sum sum1 sum2))
    (loop for x of-type single-float across a
          for y of-type single-float across b
          do (incf sum (float (* x y) 1d0))
             (incf sum1 (float (* x x) 1d0))
             (incf sum2 (float (* y y) 1d0)))
    (cond ((and (zerop sum1) (zerop sum2)) 1.0)
          ((or (zerop sum1) (zerop sum2)) 0.0)
          ;; within [-1, 1] give or take a rounding: the plain cast
          (t (float (/ sum (* (sqrt sum1) (sqrt sum2))) 1.0)))))

(defun write-embeddings-document (rows inputs format stream)
  "Write ROWS (the embedding rows of INPUTS inputs, in order) to STREAM as
llama-embedding's --embd-output-format FORMAT writes them: :array one line
[[...],[...]]; :json an object {\"object\": \"list\", \"data\": [{\"object\":
\"embedding\", \"index\": i, \"embedding\": [...]} ...]} laid out over lines
as llama-embedding lays it out; :json+ the same with \"cosineSimilarity\",
the matrix of every row against every row, when there is more than one
input.  Numbers as JSON-FLOAT-STRING writes them (doc/command-line.md §6)."
  (flet ((row (r) (write-char #\[ stream) (write-numbers r stream :separator "," :json t)
           (write-char #\] stream)))
    (if (eq format :array)
        (progn (write-char #\[ stream)
               (loop for r across rows for i from 0
                     do (when (plusp i) (write-char #\, stream))
                        (row r))
               (write-char #\] stream)
               (terpri stream))
        (progn
          (format stream "{~%  \"object\": \"list\",~%  \"data\": [~%")
          (loop for r across rows for i from 0
                do (when (plusp i) (format stream ",~%"))
                   (format stream "    {~%      \"object\": \"embedding\",~%      \"index\": ~D,~%      ~
\"embedding\": " i)
                   (row r)
                   (format stream "~%    }"))
          (format stream "~%  ]")
          (when (and (eq format :json+) (> inputs 1))
            (format stream ",~%  \"cosineSimilarity\": [~%")
            (loop for a across rows for i from 0
                  do (when (plusp i) (format stream ",~%"))
                     (write-string "    [" stream)
                     (write-numbers (map '(simple-array single-float (*))
                                         (lambda (b) (cosine-similarity a b)) rows)
                                    stream :separator ", " :json t)
                     (write-string " ]" stream))
            (format stream "~%  ]"))
          (format stream "~%}~%")))))

(defun float32-octets (rows)
  "The single-floats of ROWS (a sequence of single-float vectors), one
after the other, as little-endian binary32 octets."
  (let ((octets (make-array (* 4 (reduce #'+ rows :key #'length))
                            :element-type '(unsigned-byte 8)))
        (i 0))
    (map nil (lambda (row)
               (loop for x across row
                     for bits = (%single-bits x)
                     do (dotimes (j 4)
                          (setf (aref octets i) (ldb (byte 8 (* 8 j)) bits))
                          (incf i))))
         rows)
    octets))

(defun npy-header (n d)
  "The header of a NumPy .npy file (format 1.0) of a little-endian float32
C-order array of shape (N, D): the magic string, the version, the header's
length and its dictionary, padded with spaces and a newline to a multiple
of 64 octets, as numpy.save writes it."
  (let* ((dict (format nil "{'descr': '<f4', 'fortran_order': False, 'shape': (~D, ~D), }" n d))
         (length (* 64 (ceiling (+ 10 (length dict) 1) 64)))
         (text (concatenate 'string dict
                            (make-string (- length 10 (length dict) 1) :initial-element #\Space)
                            (string #\Newline)))
         (size (length text)))
    (concatenate '(vector (unsigned-byte 8))
                 #(#x93) (map 'vector #'char-code "NUMPY") #(1 0)
                 (vector (ldb (byte 8 0) size) (ldb (byte 8 8) size))
                 (map 'vector #'char-code text))))

(defun write-npy (path rows)
  "Write ROWS (single-float vectors of one length) to the file PATH as a
NumPy .npy array of float32, shape (rows, length), atomically."
  (let ((d (if (plusp (length rows)) (length (elt rows 0)) 0)))
    (write-file-atomically path (list (coerce (npy-header (length rows) d)
                                              '(simple-array (unsigned-byte 8) (*)))
                                      (float32-octets rows)))))

;;; Work on several threads, results in order.  MAP-IN-ORDER hands the
;;; items a feeder submits to worker threads and gives each result to an
;;; emitter in the order the items came, as soon as that item and every
;;; one before it are done: `decide --threads N' answers a questions file
;;; (or a pipe, line by line) this way, and `bench --questions' times it.
;;;
;;; The feeder fills a window of items ahead of the workers and works
;;; on one itself only when the window is full, so that a worker that
;;; finishes an item finds the next one waiting: when the caller worked
;;; as soon as two items were queued, a worker often waited for the next
;;; submit (ECL spins, yielding, then sleeps until a signal wakes it), and
;;; `decide --threads 2' kept 1.75 of 2 CPUs busy.  A thread waits on the
;;; condition variable only when there is nothing it can do, and the
;;; others wake it only when one waits.

(defstruct (ordered-run (:constructor make-ordered-run (work emit window weight budget)))
  "The state MAP-IN-ORDER's threads share, under LOCK: the items submitted
and not yet taken (QUEUE, a list of (index . item), and its last cons
TAIL), the count SUBMITTED, NEXT (the index of the next item to emit), the
finished items not yet emitted (DONE, index -> (item . result)), CLOSED
once the feeder has submitted its last item, FAILURE, the condition that
stopped the run (or :ABANDONED when the caller unwound), WAITING, how
many threads wait on CHANGED now, and HELD, the WEIGHT of the items
submitted and not yet emitted, which stays within BUDGET (or NIL)."
  work emit window weight budget (held 0)
  (lock (mp:make-lock :name "ordered run"))
  (changed (mp:make-condition-variable))
  (queue '()) (tail '()) (submitted 0) (next 0)
  (done (make-hash-table)) (closed nil) (failure nil)
  (waiting 0 :type fixnum))

(defun ordered-wait (run)
  "Wait (holding RUN's lock) until another thread changes RUN."
  (incf (ordered-run-waiting run))
  (unwind-protect (mp:condition-variable-wait (ordered-run-changed run) (ordered-run-lock run))
    (decf (ordered-run-waiting run))))

(defun ordered-wake (run)
  "Wake (holding RUN's lock) the threads that wait on RUN, if any."
  (when (plusp (ordered-run-waiting run))
    (mp:condition-variable-broadcast (ordered-run-changed run))))

(defun emit-ready (run)
  "Emit (under RUN's lock) every finished item whose predecessors are all
emitted."
  (loop for index = (ordered-run-next run)
        for entry = (gethash index (ordered-run-done run))
        while entry
        do (remhash index (ordered-run-done run))
           (setf (ordered-run-next run) (1+ index))
           (when (ordered-run-weight run)
             (decf (ordered-run-held run) (funcall (ordered-run-weight run) (car entry))))
           (funcall (ordered-run-emit run) (car entry) (cdr entry))))

(defun ordered-fail (run condition)
  "Make CONDITION RUN's failure, unless it has one, and wake its threads."
  (mp:with-lock ((ordered-run-lock run))
    (unless (ordered-run-failure run)
      (setf (ordered-run-failure run) condition))
    (ordered-wake run)))

(defun ordered-finish (run job)
  "Compute the result of JOB, (index . item), record it and emit what is
ready (under RUN's lock); a serious condition in the work or the emitter
becomes the run's failure.  Answers true when it did not fail."
  (handler-case
      (let ((result (funcall (ordered-run-work run) (cdr job))))
        (mp:with-lock ((ordered-run-lock run))
          (unwind-protect
               (progn (setf (gethash (car job) (ordered-run-done run))
                            (cons (cdr job) result))
                      (emit-ready run))
            (ordered-wake run)))
        t)
    (serious-condition (c)
      (ordered-fail run c)
      nil)))

(defun ordered-worker (run)
  "A worker of MAP-IN-ORDER: take the oldest submitted item and finish it
(ORDERED-FINISH), until the feeder has closed the run and the queue is
empty, or the run failed."
  (let ((lock (ordered-run-lock run)))
    (loop
      (let ((job (mp:with-lock (lock)
                   (loop (cond ((ordered-run-failure run) (return nil))
                               ((ordered-run-queue run) (return (pop (ordered-run-queue run))))
                               ((ordered-run-closed run) (return nil))
                               (t (ordered-wait run)))))))
        (unless (and job (ordered-finish run job))
          (return))))))

(defun ordered-submit (run item)
  "MAP-IN-ORDER's SUBMIT: queue ITEM in RUN once its window has room.
While the window is full the caller works on the oldest waiting item
itself (ORDERED-FINISH), and waits only when there is none; the run's
failure is signalled here."
  (let ((lock (ordered-run-lock run))
        (weight (if (ordered-run-weight run) (funcall (ordered-run-weight run) item) 0)))
    (loop
      (let ((job (mp:with-lock (lock)
                   (loop
                     (let ((failure (ordered-run-failure run)))
                       (when failure
                         (error failure)))
                     (cond ((let ((in-window (- (ordered-run-submitted run) (ordered-run-next run))))
                              (and (< in-window (ordered-run-window run))
                                   (or (zerop in-window)
                                       (null (ordered-run-budget run))
                                       (<= (+ (ordered-run-held run) weight)
                                           (ordered-run-budget run)))))
                            (incf (ordered-run-held run) weight)
                            (let ((cell (list (cons (ordered-run-submitted run) item))))
                              (if (ordered-run-queue run)
                                  (setf (cdr (ordered-run-tail run)) cell)
                                  (setf (ordered-run-queue run) cell))
                              (setf (ordered-run-tail run) cell))
                            (incf (ordered-run-submitted run))
                            (ordered-wake run)
                            (return nil))
                           ((ordered-run-queue run)
                            (return (pop (ordered-run-queue run))))
                           (t (ordered-wait run)))))))
        (if job
            (ordered-finish run job)
            (return))))))

(defparameter *window-per-thread* 32
  "MAP-IN-ORDER's default window, per thread: the items one thread may
finish while another is on an older one (a short item's worth of time
each, descheduled by a busy machine or on a long item) before the first
runs out of items.")

(defun map-in-order (threads feed work emit &key (window (* *window-per-thread* threads))
                                               weight budget)
  "Call FEED with one argument, SUBMIT, a function that FEED calls on each
item in turn; each item's result is (funcall WORK item), computed on one
of THREADS Lisp threads (the caller's and THREADS - 1 others, kept for
the next run: START-SPARE-THREAD), and (funcall EMIT item result) is called for every item in the order it was
submitted, one call at a time, as soon as the item and all submitted
before it are done (on whichever thread finished last).  At most WINDOW
items are submitted and not yet emitted, and with WEIGHT (a function of
an item answering a non-negative integer, its size) and BUDGET, those
items weigh at most BUDGET in all but when there is one (an item heavier
than BUDGET goes alone).  The caller fills the window
ahead of the other threads, and while it is full SUBMIT works on the
oldest waiting item itself rather than wait for room, so that THREADS
threads compute where there are THREADS cores and a thread that finishes
an item finds the next one waiting (one woken for each item waits as long
as the wake-up takes).  THREADS 1 starts no thread: SUBMIT works and emits
at once.  The other threads see the global values of special variables,
not the caller's bindings: WORK and EMIT take what they need from their
closures.  A serious condition in WORK or EMIT stops the run (nothing
after that item is emitted) and is signalled again in the caller, as is
one in FEED once the threads have stopped.  Answers the number of
items."
  (when (= threads 1)
    (let ((n 0))
      (funcall feed (lambda (item)
                      (funcall emit item (funcall work item))
                      (incf n)))
      (return-from map-in-order n)))
  (let* ((state (make-ordered-run work emit window weight budget))
         (lock (ordered-run-lock state))
         (workers '()))
    (unwind-protect
         (progn
           (dotimes (i (1- threads))
             (push (start-spare-thread (format nil "ordered worker ~D" (1+ i))
                                       (lambda () (ordered-worker state)))
                   workers))
           (funcall feed (lambda (item) (ordered-submit state item)))
           (mp:with-lock (lock)
             (setf (ordered-run-closed state) t)
             (ordered-wake state))
           ;; the caller helps with what is left
           (loop for job = (mp:with-lock (lock)
                             (and (not (ordered-run-failure state))
                                  (pop (ordered-run-queue state))))
                 while (and job (ordered-finish state job)))
           (let* ((stopped (find-if #'identity
                                    (mapcar #'join-spare-thread (shiftf workers '()))))
                  (failure (or (ordered-run-failure state) stopped)))
             (when failure
               (error failure)))
           (ordered-run-submitted state))
      ;; Unwinding (an error in FEED, an interrupt): the workers finish
      ;; the item at hand and stop.
      (when workers
        (mp:with-lock (lock)
          (unless (ordered-run-failure state)
            (setf (ordered-run-failure state) :abandoned))
          (ordered-wake state))
        (mapc #'join-spare-thread workers)))))
