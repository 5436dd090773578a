;;;; lines.lisp - the line-by-line work of `tokenize', `embed' and `decide':
;;;; a file's lines read in bounded memory (or a pipe's, each answered as it
;;;; comes), token lists parsed, and one question answered per line.  The
;;;; model answers; this file reads and prints.

(in-package "COMMAND-LINE")

;;; Texts from a file, one per line, in bounded memory.

(defparameter *max-line-bytes* (* 64 1024 1024)
  "The longest line a text file may hold (bytes).")

(defun lines-name (path)
  "How messages name the file of lines PATH: \"standard input\" for \"-\"."
  (if (equal path "-") "standard input" path))

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
  (terpri stream))

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
  (loop with start = 0
        for nl = (position #\Newline text :start start)
        collect (subseq text start (or nl (length text)))
        while nl
        do (setf start (1+ nl))))

;;; `rontolisp decide'.

(defun decide-line (model octets number activations json)
  "Answer the question of one line (OCTETS, line NUMBER) of a questions
file on standard output, as `decide' prints it."
  (let ((object (handler-case (parse-json (%utf8-string octets))
                  (json-error (c)
                    (model:question-error "expected a question as a JSON object, found ~A"
                                          (rontolisp-error-message c))))))
    (unless (hash-table-p object)
      (model:question-error "expected a question as a JSON object, found ~A" (json-brief object)))
    (let ((question (parse-question object)))
      (multiple-value-bind (probabilities logits ids markers)
          (model:decide model question :activations activations)
        (if json
            (progn
              (write-json (list :object (cons "question" number) (cons "ids" ids)
                                (cons "markers" (coerce markers 'vector))
                                (cons "logits" logits) (cons "probabilities" probabilities))
                          *standard-output*)
              (terpri))
            (let ((options (parsed-question-options question)))
              (format t "question ~D (~A, ~D option~:P)~%" number (parsed-question-type question)
                      (length options))
              (loop for p across probabilities for o across options
                    do (format t "  ~A " (float-text p))
                       (write-escaped (option-text o) *standard-output* :quotes nil)
                       (terpri))))))))
