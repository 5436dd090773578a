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
  "The lines of TEXT, split at each newline (SPLIT-AT-SEPARATOR)."
  (split-at-separator text (string #\Newline)))

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

(defun normalized-embeddings (encoder ids pooling normalize activations gelu)
  "The embedding rows of IDS as `embed' prints them: MODEL:ENCODE's answer
with POOLING (one row, or one per token for :none), each row scaled by
NORMALIZE-EMBEDDING with NORMALIZE; a simple vector of single-float
vectors."
  (map 'vector (lambda (row) (normalize-embedding row normalize))
       (embedding-rows (model:encode encoder ids :pooling pooling
                                                 :activations activations :gelu gelu))))

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
          (t (%double-to-single (/ sum (* (sqrt sum1) (sqrt sum2))))))))

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
