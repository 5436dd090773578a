;;;; test-qtypes.lisp - the quantized matrix of every type llama-quantize
;;;; writes without an importance matrix (Q4_0 .. IQ4_XS): gguf:tensor
;;;; answers one over the file's bytes, and AREF (interpreted and compiled),
;;;; ROW-MAJOR-AREF, LINALG:ROW and DEQUANTIZE give ggml's dequantized
;;;; values, the same floats as the C dequantizer over the whole tensor.

(in-package "RONTOLISP-TESTS")

(def-suite qtypes :in all :description "Quantized matrices of the legacy, K-quant and IQ4 types.")
(in-suite qtypes)

(defparameter *qtypes*
  '((rontolisp:q4-0 "Q4_0") (rontolisp:q4-1 "Q4_1") (rontolisp:q5-0 "Q5_0")
    (rontolisp:q5-1 "Q5_1") (rontolisp:q2-k "Q2_K") (rontolisp:q3-k "Q3_K")
    (rontolisp:q4-k "Q4_K") (rontolisp:q5-k "Q5_K") (rontolisp:q6-k "Q6_K")
    (rontolisp:iq4-nl "IQ4_NL") (rontolisp:iq4-xs "IQ4_XS"))
  "Each type's format symbol and ggml name.")

(defun heavy-tailed-matrix (rows cols seed)
  "ROWS x COLS single-floats: Gaussian-like values with a few outliers of
50x, and one row of zeros, so that every scale path of the quantizers runs."
  (let ((a (make-array (list rows cols) :element-type 'single-float))
        (*random-state* (sb-random-state seed)))
    (dotimes (i rows a)
      (dotimes (j cols)
        (setf (aref a i j)
              (if (= i 1)
                  0.0
                  (let ((g (- (+ (random 1.0) (random 1.0) (random 1.0)) 1.5)))
                    (if (zerop (random 37)) (* 50 g) g))))))))

(defun sb-random-state (seed)
  (make-random-state seed))             ; ECL seeds a state from an integer

(defun qtype-file (path rows cols)
  "Write every type's quantized matrix of the same ROWS x COLS data to PATH
(tensor NAME = the ggml name) and one rank-1 Q4_K tensor \"v\"; answers
the source array."
  (let ((a (heavy-tailed-matrix rows cols 7)))
    (gguf:write path (gguf:make-file
                      :tensors (append
                                (loop for (fmt name) in *qtypes*
                                      collect (list name (rontolisp:quantize a fmt)))
                                (list (list "v" (rontolisp:quantize (linalg:row a 0)
                                                                    'rontolisp:q4-k))))))
    a))

(defun whole-tensor-reference (f name)
  "The C dequantizer over the whole tensor NAME of F (rl_dequantize, not
through a quantized matrix)."
  (let ((info (gguf:tensor-info f name)))
    (gguf::%gguf-dequantize-tensor (gguf::live-handle f) (gguf::tensor-index f info)
                                   (make-array (gguf:tensor-info-shape info)
                                               :element-type 'single-float))))

(defun compiled-aref-2 ()
  (compile nil '(lambda (m i j) (aref m i j))))

(defun compiled-row-major-aref ()
  (compile nil '(lambda (m k) (row-major-aref m k))))

(test gguf-tensor-answers-every-type-as-a-quantized-matrix
  "Every type: a quantized matrix of the tensor's type and shape whose
every element, read each way, is the C dequantizer's value for the whole
tensor, bit for bit."
  (let* ((path (tmp-path "qtypes.gguf"))
         (rows 3) (cols 512)
         (src (qtype-file path rows cols))
         (caref (compiled-aref-2))
         (crm (compiled-row-major-aref)))
    (declare (ignore src))
    (gguf:with-file (f path)
      (loop for (fmt name) in *qtypes*
            do (let ((m (gguf:tensor f name))
                     (ref (whole-tensor-reference f name)))
                 (is (rontolisp:quantized-matrix-p m) "~A: ~S" name m)
                 (is (string= name (rontolisp:quantized-matrix-type m)))
                 (is (eq fmt (array-element-type m)))
                 (is (equal (list rows cols) (array-dimensions m)))
                 (is (= (* rows cols) (array-total-size m)))
                 (is (string= (format nil "#<quantized-matrix ~(~A~) (~D ~D)>" fmt rows cols)
                              (prin1-to-string m)))
                 (is (search (format nil "ggml's ~A" name)
                             (with-output-to-string (s) (describe m s))))
                 (let ((d (rontolisp:dequantize m)))
                   (is (typep d `(simple-array single-float (,rows ,cols))))
                   (is (equalp d ref) "~A: dequantize differs from the whole tensor's" name))
                 (let ((bad '()))
                   (dotimes (i rows)
                     (let ((row (linalg:row m i)))
                       (dotimes (j cols)
                         (let ((want (aref ref i j))
                               (k (+ (* i cols) j)))
                           (unless (and (= want (aref m i j))                 ; function cell
                                        (= want (funcall #'aref m i j))
                                        (= want (funcall caref m i j))        ; compiled
                                        (= want (row-major-aref m k))
                                        (= want (funcall crm m k))
                                        (= want (aref row j)))
                             (push (list i j) bad))))))
                   (is (null bad) "~A: elements differing from the whole tensor's: ~S" name
                       (subseq bad 0 (min 5 (length bad)))))))
      (let ((v (gguf:tensor f "v")))
        (is (equal (list cols) (array-dimensions v)))
        (is (equalp (rontolisp:dequantize v) (whole-tensor-reference f "v")))
        (is (= (aref (whole-tensor-reference f "v") 300) (aref v 300)))))
    (delete-file path)))

(test other-types-round-trip-through-files
  "A quantized matrix of any type is written as its type's blocks unchanged,
and QUANTIZE's bytes of it are the file's."
  (let ((path (tmp-path "qtypes-bytes.gguf"))
        (a (heavy-tailed-matrix 2 256 11)))
    (loop for (fmt name) in *qtypes*
          do (let ((m (rontolisp:quantize a fmt)))
               (gguf:write path (gguf:make-file :tensors (list (list "w" m))))
               (gguf:with-file (f path)
                 (is (string= name (gguf:tensor-info-type (gguf:tensor-info f "w"))))
                 (is (equalp (rontolisp:quantized-matrix-octets m) (gguf:tensor-octets f "w")))
                 (let ((out (tmp-path "qtypes-seq.bin")))
                   (with-open-file (s out :direction :output :element-type '(unsigned-byte 8)
                                          :if-exists :supersede)
                     (write-sequence (gguf:tensor f "w") s))
                   (is (equalp (gguf:tensor-octets f "w")
                               (with-open-file (s out :element-type '(unsigned-byte 8))
                                 (let ((v (make-array (file-length s)
                                                      :element-type '(unsigned-byte 8))))
                                   (read-sequence v s)
                                   v)))
                       "~A: write-sequence differs from the file's bytes" name)
                   (delete-file out))
                 (is (equalp (rontolisp:dequantize m)
                             (rontolisp:dequantize (gguf:tensor f "w")))))))
    (delete-file path)))

(test other-types-closed-file
  "A matrix of any type used after gguf:close signals gguf:file-closed-error,
interpreted and compiled."
  (let ((path (tmp-path "qtypes-closed.gguf"))
        (caref (compiled-aref-2)))
    (qtype-file path 2 256)
    (let* ((f (gguf:read path))
           (m (gguf:tensor f "Q4_K"))
           (n (gguf:tensor f "IQ4_NL")))
      (is (numberp (aref m 1 3)))
      (gguf:close f)
      (signals gguf:file-closed-error (aref m 1 3))
      (signals gguf:file-closed-error (funcall caref n 0 0))
      (signals gguf:file-closed-error (row-major-aref m 5))
      (signals gguf:file-closed-error (rontolisp:dequantize n))
      (signals gguf:file-closed-error (linalg:row m 0))
      (signals gguf:file-closed-error (gguf:tensor f "Q6_K")))
    (delete-file path)))

(test other-types-refuse-what-they-cannot-do
  (let ((path (tmp-path "qtypes-refuse.gguf"))
        (caref (compiled-aref-2)))
    (qtype-file path 2 256)
    (gguf:with-file (f path)
      (let ((m (gguf:tensor f "Q5_K")))
        ;; out of range, wrong subscript counts
        (signals rontolisp:index-error (aref m 2 0))
        (signals rontolisp:index-error (aref m 0 256))
        (signals rontolisp:index-error (funcall caref m 0 -1))
        (signals rontolisp:index-error (aref m 0))
        (signals rontolisp:index-error (row-major-aref m 512))
        (signals rontolisp:index-error (linalg:row m 2))
        ;; elements cannot be written
        (signals rontolisp:immutable-error (setf (aref m 0 0) 1.0))
        ;; the product reads the mapped blocks themselves: the same bits as
        ;; on the matrix copied into memory
        (let ((x (make-array 256 :element-type 'single-float :initial-element 1.0))
              (copy (rontolisp:quantize (rontolisp:dequantize m) 'rontolisp:q5-k)))
          (is (equalp (rontolisp:quantized-matrix-octets copy)
                      (rontolisp:quantized-matrix-octets m)))
          (is (same-bits-p (vec:matvec copy x) (vec:matvec m x))))
        ;; the other operations want floats and say so
        (signals rontolisp:quantized-matrix-error (linalg:transpose m))))
    (delete-file path))
  (let ((a (heavy-tailed-matrix 2 256 3)))
    (signals rontolisp:element-type-error (rontolisp:quantize a 'rontolisp:q4-k :outliers '(3)))
    (signals rontolisp:shape-error
      (rontolisp:quantize (make-array '(2 32) :element-type 'single-float) "q6_k"))
    ;; half-float input: its values widened, then quantized
    (let ((h (rontolisp:make-float16-array a)))
      (is (equalp (rontolisp:quantized-matrix-octets (rontolisp:quantize h 'rontolisp:q5-k))
                  (rontolisp:quantized-matrix-octets
                   (rontolisp:quantize (rontolisp:half-array-to-single h) 'rontolisp:q5-k)))))
    (setf (aref a 1 7) (rontolisp::%bits-single #x7fc00000))
    (signals rontolisp:non-finite-error (rontolisp:quantize a :q4_0))
    (signals rontolisp:unknown-format-error (rontolisp:quantize a 'q7-k))))

;;; The encoder on files of these types: llama-quantize's own (through
;;; tools/llama_quantize, llama.cpp's llama_model_quantize) against
;;; llama.cpp's encoder, and the same bits on every path and thread count.

(defparameter *llama-quantize-ftypes*
  '(("q4_k_m" "Q4_K") ("q4_0" "Q4_0") ("q5_1" "Q5_1") ("q6_k" "Q6_K") ("iq4_nl" "IQ4_NL"))
  "The ftypes of the libllama agreement test, each with a tensor type the
file it makes must hold.")

(defvar *llama-quantized-files* (make-hash-table :test 'equal)
  "ftype -> the s1-micro file llama-quantize made of it, once per run.")

(defun llama-quantize-program ()
  "build/tools/llama_quantize beside the executable under test, or NIL."
  (let ((p (merge-pathnames "tools/llama_quantize" (truename *exe*))))
    (and (probe-file p) (namestring p))))

(defun s1-micro-f32-file ()
  "An encoder-only F32 s1-micro (rows of 256 and 512: every K-quant applies,
none falls back), written once per run."
  (or (gethash "f32" *llama-quantized-files*)
      (let ((path (tmp-path "qtypes-s1-micro-f32.gguf")))
        (gguf:write path (command-line::random-model "s1-micro" :type :f32 :encoder-only t))
        (setf (gethash "f32" *llama-quantized-files*) path))))

(defun llama-quantized-file (ftype)
  "The s1-micro F32 file quantized to FTYPE by llama.cpp's llama-quantize
(one thread), or NIL when the tool or llama.cpp's libraries are missing."
  (or (gethash ftype *llama-quantized-files*)
      (let ((program (llama-quantize-program))
            (out (tmp-path (format nil "qtypes-s1-micro-~A.gguf" ftype))))
        (when program
          (let ((code (run-child program (list (s1-micro-f32-file) out ftype "1")
                                 :input nil :output nil :error nil)))
            ;; 3: llama.cpp's libraries could not be loaded
            (unless (eql code 3)
              (is (eql 0 code) "llama_quantize ~A exited ~S" ftype code)
              (when (eql 0 code)
                (setf (gethash ftype *llama-quantized-files*) out))))))))

(test encoder-on-llama-quantize-files-near-llama-cpp
  "Each file llama-quantize made from a random modern-bert: our encoder's
hidden states within 2e-2 of the largest of llama.cpp's own."
  (let ((ids (loop for i below 300 collect (mod (+ 3 (* i 37)) 4096))))
    (loop for (ftype type) in *llama-quantize-ftypes*
          for file = (llama-quantized-file ftype)
          do (if (null file)
                 (skip-reference "build/tools/llama_quantize or llama.cpp's libraries are missing ~
(make tools; sh tests/fetch-llama-lib.sh)")
                 (gguf:with-file (f file)
                   (is (find type (gguf:tensor-infos f) :key #'gguf:tensor-info-type
                                                        :test #'string=)
                       "~A: no ~A tensor in llama-quantize's file" ftype type)
                   (let ((ref (command-line::llama-encode file (list ids))))
                     (if (null ref)
                         (skip-reference "llama.cpp's encoder (build/tools/llama_embed) is missing")
                         (multiple-value-bind (diff big cos)
                             (command-line::hidden-state-error
                              (model:encode (model:load file) ids :gelu :tanh) (cdr (first ref)))
                           (format t "~&  s1-micro ~A, 300 tokens vs llama.cpp: max difference ~
~,3e of the largest, cosine ~,10F~%" ftype (/ diff big) cos)
                           (is (< (/ diff big) 2d-2) "~A: ~,3e" ftype (/ diff big))))))))))

(defun rontolisp-quantized-file (ftype)
  "The s1-micro F32 file quantized to FTYPE by `rontolisp quantize' (one
thread), made once per run."
  (let ((key (format nil "rontolisp ~A" ftype)))
    (or (gethash key *llama-quantized-files*)
        (let ((out (tmp-path (format nil "qtypes-s1-micro-rontolisp-~A.gguf" ftype))))
          (multiple-value-bind (code stdout stderr)
              (run-exe (list "quantize" (s1-micro-f32-file) out ftype "1"))
            (declare (ignore stdout))
            (is (eql 0 code) "quantize ~A exited ~S: ~A" ftype code stderr)
            (when (eql 0 code)
              (setf (gethash key *llama-quantized-files*) out)))))))

(test encoder-on-own-quantize-files-nearer-llama-cpp-than-f32-products
  "`rontolisp quantize' Q4_K_M and Q4_0 files of a random modern-bert: our
hidden states within 2e-2 of the largest of llama.cpp's own on the same
file, and nearer them than the same weights' f32 products (the file
dequantized), since the products now quantize the activations as ggml
does."
  (let ((ids (loop for i below 300 collect (mod (+ 3 (* i 37)) 4096))))
    (dolist (ftype '("q4_k_m" "q4_0"))
      (let* ((file (rontolisp-quantized-file ftype))
             (ref (and file (command-line::llama-encode file (list ids)))))
        (if (null ref)
            (skip-reference "llama.cpp's encoder (build/tools/llama_embed) or its libraries are ~
missing (make tools; sh tests/fetch-llama-lib.sh)")
            (let ((ours (relative-error (model:encode (model:load file) ids :gelu :tanh)
                                        (cdr (first ref))))
                  (f32 (relative-error (model:encode (model:load (dequantized-file file)) ids
                                                     :gelu :tanh)
                                       (cdr (first ref)))))
              (format t "~&  s1-micro ~A (rontolisp quantize), 300 tokens vs llama.cpp: max ~
difference ~,3e of the largest (~,3e with f32 products)~%" ftype ours f32)
              (is (< ours 2d-2) "~A: ~,3e" ftype ours)
              (is (< ours f32) "~A: ~,3e, not nearer than f32 products' ~,3e" ftype ours f32)))))))

(defun file-with-types (source types)
  "An in-memory copy of the GGUF file object SOURCE whose encoder matrices
are quantized, in turn, to each of the format symbols TYPES."
  (let ((k -1))
    (gguf:make-file
     :metadata (remove "general.alignment" (gguf:metadata source) :key #'first :test #'string=)
     :tensors (loop for info in (gguf:tensor-infos source)
                    for name = (gguf:tensor-info-name info)
                    for data = (gguf:tensor source name)
                    collect (list name (if (and (= 2 (length (gguf:tensor-info-shape info)))
                                                (search "blk." name))
                                           (rontolisp:quantize
                                            data (nth (mod (incf k) (length types)) types))
                                           data))))))

(test encoder-on-every-type-same-bits-everywhere
  "An encoder whose matrices are of every type keeps them as the file holds
them, answers the same bits with SIMD off and on and on 1 and 2 threads,
and within a quantization error of the file with those matrices
dequantized (only the activations' rounding differs)."
  (let* ((source (gguf:read (s1-micro-f32-file)))
         (path (tmp-path "qtypes-every-type.gguf"))
         (ids (loop for i below 40 collect (mod (* 11 i) 4096))))
    (gguf:write path (file-with-types source (mapcar #'first *qtypes*)))
    (gguf:close source)
    (gguf:with-file (f path)
      (is (= (length *qtypes*)
             (length (remove-duplicates
                      (remove-if-not (lambda (ty) (find ty *qtypes* :key #'second :test #'string=))
                                     (mapcar #'gguf:tensor-info-type (gguf:tensor-infos f)))
                      :test #'string=)))))
    (let ((e (model:load path)))
      (is (= (length *qtypes*)
             (length (remove-duplicates
                      (loop for layer in (model::encoder-layers e)
                            append (loop for key in '(:qkv :out :up :down)
                                         for m = (getf layer key)
                                         when (rontolisp:quantized-matrix-p m)
                                           collect (rontolisp:quantized-matrix-type m)))
                      :test #'string=)))
          "the encoder's matrices should stay quantized in every type")
      (check-same-bits-on-every-path e ids)
      (let ((rel (relative-error (model:encode e ids)
                                 (model:encode (model:load (dequantized-file path)) ids))))
        (is (< 0 rel 2e-2) "~,3e of the largest hidden value from the dequantized file" rel)))
    (delete-file path)))

(test bench-model-times-the-file-as-stored
  "`bench --model' on a file of other types adds a row for the file as it
is stored, named after its types; its hidden states are within a
quantization error of the F32 copy's (the same weights, the activations
quantized for the types' products)."
  (let* ((source (command-line::random-model "s1-pico" :type :f32 :encoder-only t))
         (file (tmp-path "qtypes-bench.gguf")))
    (unwind-protect
         (progn
           (gguf:write file (file-with-types source '(rontolisp:q4-0 rontolisp:iq4-nl)))
           (let* ((rows (command-line::run-model-bench :file file :token-counts '(4)
                                                    :thread-counts '(1) :reps 1
                                                    :stream (make-broadcast-stream)))
                  (own (find "Q4_0+IQ4_NL (as stored)" rows :key (lambda (r) (getf r :format))
                                                                :test #'equal)))
             (is (= 5 (length rows)) "~S" (mapcar (lambda (r) (getf r :format)) rows))
             (is (and own (< 0 (getf own :max-abs-error) 5e-2)) "~S" own)))
      (ignore-errors (delete-file file)))))

(test embed-command-on-a-llama-quantize-file
  "`rontolisp embed' on llama-quantize's Q4_K_M file prints what
MODEL:ENCODE answers for it."
  (let ((file (llama-quantized-file "q4_k_m"))
        (ids '(2 17 9 3)))
    (if (null file)
        (skip-reference "build/tools/llama_quantize or llama.cpp's libraries are missing")
        (let ((j (first (embed-json (list file "--tokens" "2,17,9,3" "--pooling" "none"
                                          "--normalize" "none")))))
          (is (equalp (model::embedding-rows (model:encode (model:load file) ids))
                      (map 'vector #'json-floats (gethash "embeddings" j))))))))

(test aref-decodes-one-block
  "Reading an element decodes the block holding it, not the matrix: 2,000
elements of a 2048 x 2048 Q4_K matrix from a file take less processor time
than 4 whole dequantizations (decoding the matrix per read would take
hundreds of times more)."
  (let* ((path (tmp-path "qtypes-big.gguf"))
         (a (make-array '(2048 2048) :element-type 'single-float)))
    (dotimes (i (array-total-size a))
      (setf (row-major-aref a i) (float (- (mod (* i 7919) 2001) 1000) 1.0)))
    (gguf:write path (gguf:make-file :tensors (list (list "w" (rontolisp:quantize a 'rontolisp:q4-k)))))
    (gguf:with-file (f path)
      (let* ((m (gguf:tensor f "w"))
             (caref (compiled-aref-2))
             (whole (run-seconds (lambda () (dotimes (k 4) (rontolisp:dequantize m)))))
             (reads (run-seconds (lambda ()
                                   (dotimes (k 1000)
                                     (aref m (mod (* k 37) 2048) (mod (* k 101) 2048))
                                     (funcall caref m (mod (* k 53) 2048) (mod (* k 7) 2048)))))))
        (is (< reads whole) "2,000 reads ~,3F s, 4 dequantizations ~,3F s" reads whole)))
    (delete-file path)))

(test quantize-equals-llama-quantize-goldens
  "RONTOLISP:QUANTIZE of each tensor of llama-quantize's F32 input, into
the type llama-quantize chose for it, gives the golden file's bytes; and the
golden's matrices read element by element as the C dequantizer reads the
whole tensor."
  (let ((checked (make-hash-table :test 'equal))
        (caref (compiled-aref-2)))
    (with-tracked-fixture ((golden "quants/quant_main.f32.gguf"))
      (gguf:with-file (src (golden "quants/quant_main.f32.gguf"))
        (dolist (ftype *quant-golden-ftypes*)
          (let ((name (format nil "quants/quant_main.~A.gguf" ftype)))
            (with-tracked-fixture ((golden name))
              (gguf:with-file (f (golden name))
                (dolist (info (gguf:tensor-infos f))
                  (let* ((tname (gguf:tensor-info-name info))
                         (m (gguf:tensor f tname)))
                    (when (and (rontolisp:quantized-matrix-p m)
                               (rontolisp::other-quantized-format
                                (rontolisp:quantized-matrix-type m)))
                      (let* ((type (rontolisp:quantized-matrix-type m))
                             (ours (rontolisp:quantize (gguf:tensor src tname) type))
                             (ref (whole-tensor-reference f tname))
                             (n (array-total-size ref))
                             (cols (car (last (array-dimensions m)))))
                        (setf (gethash type checked) t)
                        (is (equalp (gguf:tensor-octets f tname)
                                    (rontolisp:quantized-matrix-octets ours))
                            "~A ~A (~A): quantize differs from llama-quantize" ftype tname type)
                        ;; a spread of elements, interpreted and compiled
                        (loop for k from 0 below n by (max 1 (floor n 97))
                              for i = (floor k cols) and j = (mod k cols)
                              unless (= (row-major-aref ref k) (row-major-aref m k)
                                        (if (= 2 (array-rank ref))
                                            (funcall caref m i j)
                                            (aref m k)))
                                do (fail "~A ~A: element ~D differs" ftype tname k)
                                   (return))))))))))))
    (is (= 11 (hash-table-count checked)) "types checked: ~S"
        (loop for k being the hash-keys of checked collect k))))
