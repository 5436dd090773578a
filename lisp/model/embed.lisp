;;;; embed.lisp - `rontolisp embed': token ids or text through the encoder
;;;; of a GGUF file (model.lisp), pooled and normalized as llama.cpp's
;;;; llama-embedding does it, printed as text or JSON.

(in-package "MODEL")

;;; `rontolisp embed'.

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

(defun embedding-rows (result)
  "The rows of an encode result (a matrix or one pooled vector) as vectors."
  (if (= 1 (array-rank result))
      (vector result)
      (coerce (loop for i below (array-dimension result 0) collect (matrix-row result i))
              'vector)))

(defun option-keyword (choice)
  "The keyword of an option value as spelled in its list (\"q8x2\" -> :Q8X2)."
  (intern (string-upcase choice) "KEYWORD"))

(defparameter *pooling-types* '((0 . :none) (1 . :mean) (2 . :cls) (3 . :last) (4 . :rank))
  "llama.cpp's pooling types (modern-bert.pooling_type) by number.")

(defun file-pooling (encoder)
  "The pooling ENCODER's file names in modern-bert.pooling_type, as
llama.cpp takes it: :none when the key is absent; rank (4), which needs a
classifier head, or another number is a MODEL-ERROR."
  (let* ((n (model-key (encoder-file encoder) (encoder-path encoder) "pooling_type"
                       :type 'integer :default 0))
         (pooling (cdr (assoc n *pooling-types*))))
    (unless (member pooling '(:none :mean :cls :last))
      (key-error (encoder-path encoder) "pooling_type"
                 "0 (none), 1 (mean), 2 (cls) or 3 (last); --pooling chooses another" n))
    pooling))

(defun embed-pooled (encoder ids pooling activations gelu)
  "MODEL:ENCODE's answer for IDS with POOLING, which may also be :last (the
last token's row, as llama.cpp's LAST pooling)."
  (let ((out (model:encode encoder ids :pooling (if (eq pooling :last) :none pooling)
                                       :activations activations :gelu gelu)))
    (if (eq pooling :last) (matrix-row out (1- (array-dimension out 0))) out)))

(defun normalize-embedding (v norm)
  "The single-float vector V scaled as llama.cpp's common_embd_normalize
scales an embedding (llama-embedding --embd-normalize NORM): -1 not at all,
0 so that its largest magnitude is 32760 (an int16 range), 2 to unit
Euclidean length, another P to unit P-norm (1: taxicab).  The same
arithmetic: the sum in double (squares in single-float for 2), the scale
1/sum rounded to single-float, each element times it in single-float; a
sum of 0, or one that overflows (infinite there), scales by 0
(doc/command-line.md §6)."
  (declare (type (simple-array single-float (*)) v))
  (let* ((sum (handler-case
                  (case norm
                    (-1 1d0)
                    (0 (/ (loop for x across v maximize (float (abs x) 1d0)) 32760d0))
                    (2 (sqrt (loop for x across v sum (float (* x x) 1d0) of-type double-float)))
                    (t (expt (loop for x across v
                                   sum (expt (float (abs x) 1d0) (float norm 1d0))
                                     of-type double-float)
                             (/ 1d0 norm))))
                (floating-point-overflow () nil)))
         (scale (if (and sum (> sum 0d0)) (%double-to-single (/ 1d0 sum)) 0.0)))
    (map '(simple-array single-float (*)) (lambda (x) (* x scale)) v)))

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
