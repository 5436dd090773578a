;;;; quantize-tool.lisp - `rontolisp quantize IN.gguf OUT.gguf q8_0': a GGUF
;;;; file quantized as llama-quantize does it for ftype Q8_0.
;;;;
;;;; The output's tensors have the types and the exact bytes llama-quantize
;;;; writes (tests/golden/README.md rules 1-8): the same choice of tensors,
;;;; the F16 fall back for rows that do not split into 32-value blocks, the
;;;; same tensor order (layer, then name) and n_dims (trailing 1s dropped),
;;;; and general.quantization_version / general.file_type as the last two
;;;; keys.  One deliberate difference: the input's general.alignment is
;;;; honoured, where llama-quantize lays every file out at 32.  A file
;;;; without the key is written without it (alignment 32), so for such files
;;;; the whole output equals llama-quantize's byte for byte.
;;;;
;;;; Input values are checked as llama.cpp's loader checks them: a NaN or
;;;; infinity anywhere refuses the file, as does a Q8_0 scale or an F16
;;;; fall-back value that overflows binary16.  Nothing is written then.

(in-package "RONTOLISP")

(defparameter *quantize-name-exclusions*
  '("_norm.weight" "ffn_gate_inp.weight" "altup" "laurel" "per_layer_model_proj"
    "ssm_conv1d.weight" "shortconv.conv.weight"
    "time_mix_first.weight" "time_mix_w0.weight" "time_mix_w1.weight" "time_mix_w2.weight"
    "time_mix_v0.weight" "time_mix_v1.weight" "time_mix_v2.weight"
    "time_mix_a0.weight" "time_mix_a1.weight" "time_mix_a2.weight"
    "time_mix_g1.weight" "time_mix_g2.weight"
    "time_mix_decay_w1.weight" "time_mix_decay_w2.weight" "time_mix_lerp_fused.weight"
    "attn_rel_b.weight" ".position_embd.")
  "Substrings that keep a tensor out of quantization, as in llama.cpp's
src/llama-quant.cpp (norms, MoE gates, small recurrent and relative-position
weights).")

(defparameter *quantize-exact-exclusions* '("position_embd.weight" "token_types.weight")
  "Whole names llama-quantize never quantizes: BERT's position embeddings
and token types.")

(defun ggml-n-dims (ne)
  "ggml's n_dims of the ggml dims NE: trailing dimensions of 1 do not
count, and there is always at least one."
  (let ((last (position-if (lambda (d) (/= d 1)) ne :from-end t)))
    (if last (1+ last) 1)))

(defun trim-dims (ne)
  (subseq ne 0 (ggml-n-dims ne)))

(defun ends-with (string suffix)
  (let ((n (length string)) (m (length suffix)))
    (and (>= n m) (string= string suffix :start1 (- n m)))))

(defun quantizable-tensor-p (name ne)
  "True when llama-quantize (ftype Q8_0) quantizes the tensor NAME of ggml
dims NE: at least two dimensions besides trailing 1s, a name ending in
`weight', and none of the excluded names."
  (and (>= (ggml-n-dims ne) 2)
       (ends-with name "weight")
       (notany (lambda (s) (search s name)) *quantize-name-exclusions*)
       (not (member name *quantize-exact-exclusions* :test #'string=))))

(defun tensor-layer (name)
  "The N of a name starting `blk.N.', else -1 (llama.cpp's
weight_name_comparer reads it with sscanf \"blk.%d.\")."
  (if (and (> (length name) 4) (string= "blk." name :end2 4))
      (multiple-value-bind (n end) (parse-integer name :start 4 :junk-allowed t)
        (declare (ignore end))
        (or n -1))
      -1))

(defun octets< (a b)
  "True when the byte vector A sorts before B as C's strcmp sorts them."
  (let ((m (mismatch a b)))
    (and m (or (= m (length a))
               (and (< m (length b)) (< (aref a m) (aref b m)))))))

(defun llama-tensor-order (names)
  "NAMES sorted as llama.cpp's model loader orders tensors: by layer number
(names without `blk.N.' count as -1 and come first), then by name as bytes
(std::string's order: the same as the characters' for UTF-8, but a byte
that is not UTF-8, held as U+DC80..U+DCFF, sorts by its own value)."
  (mapcar #'first
          (stable-sort (mapcar (lambda (n) (list n (tensor-layer n) (%utf8-octets n))) names)
                       (lambda (a b)
                         (destructuring-bind (na la oa) a
                           (declare (ignore na))
                           (destructuring-bind (nb lb ob) b
                             (declare (ignore nb))
                             (if (/= la lb) (< la lb) (octets< oa ob))))))))

;;; Values and shapes.

(defun reshape-2d (data rows cols)
  "DATA (a simple single-float array or half array) as a fresh rank-2
array of ROWS x COLS with the same row-major elements (a copy)."
  (flet ((copy (src type)
           (let ((dst (make-array (list rows cols) :element-type type)))
             (replace (make-array (* rows cols) :element-type type :displaced-to dst)
                      (make-array (* rows cols) :element-type type :displaced-to src))
             dst)))
    (etypecase data
      ((simple-array single-float) (copy data 'single-float))
      (float16-array (%make-float16-array (copy (half-array-bits data) '(unsigned-byte 16))))
      (bfloat16-array (%make-bfloat16-array (copy (half-array-bits data) '(unsigned-byte 16)))))))

(defun data-as-matrix (data ne)
  "DATA as a rank-2 array of (rows cols), cols = ne[0]: the form QUANTIZE
takes for a tensor of any rank."
  (let ((cols (first ne))
        (rows (reduce #'* (rest ne))))
    (if (equal (packed-dimensions data) (list rows cols))
        data
        (reshape-2d data rows cols))))

(defun convert-tensor-data (data type &key outliers)
  "DATA (an F32, F16 or BF16 array) as TYPE (:f32 :f16 :bf16 :q8_0), itself
when it is already of that type; other conversions go through f32, rounding
to nearest even (the conversions llama.cpp's tools make).  OUTLIERS, input
columns of a matrix made :q8_0, get SPEC 10's outlier-aware scales."
  (flet ((single () (if (arrayp data) data (half-array-to-single data))))
    (ecase type
      (:f32 (single))
      (:f16 (if (float16-array-p data) data (make-float16-array (single))))
      (:bf16 (if (bfloat16-array-p data) data (make-bfloat16-array (single))))
      (:q8_0 (quantize data 'q8-0 :outliers outliers)))))

;;; The conversion.

(defun progress-reporter (total)
  "A function of (done name) that shows progress on stderr when stderr is
a terminal, and does nothing otherwise."
  (if (and (plusp total) (/= 0 (%isatty 2)))
      (lambda (done name)
        (format *error-output* "~C[~D/~D] ~A~C[K" #\Return done total name #\Esc)
        (when (= done total) (terpri *error-output*))
        (finish-output *error-output*))
      (lambda (done name) (declare (ignore done name)))))

(defmacro with-tensor-named ((path name-place) &body body)
  "Run BODY, the work on the tensors of the file PATH: an error it signals
that names no file (a type error, an exhausted heap, one of rontolisp's own
about an array) becomes TENSOR-DATA-ERROR naming the file and the tensor
NAME-PLACE holds at the time, when it holds one."
  (let ((c (gensym "C")))
    `(handler-bind ((error (lambda (,c)
                             (when (and ,name-place
                                        (not (typep ,c '(or tensor-data-error gguf::gguf-error
                                                         file-io-error))))
                               (tensor-data-error ,path ,name-place "cannot be converted: ~A"
                                                  (condition-line ,c))))))
       ,@body)))

(defun quantize-file (in out &key (type :q8_0) calibration)
  "Quantize the GGUF file IN into the GGUF file OUT as llama-quantize does
for TYPE (the one type is :q8_0, ftype 7): tensors of at least two
dimensions whose name ends in `weight' (norms, token types, position
embeddings and a few small weights excepted) become Q8_0, or F16 when their
rows are not a multiple of 32; every other tensor is copied in its type;
tensors are ordered by layer, then name; general.quantization_version = 2
and general.file_type = 7 end the metadata.  IN's general.alignment is
kept.  A NaN or infinity in IN, or a value that overflows binary16, signals
TENSOR-DATA-ERROR and writes nothing.  CALIBRATION, a calibration file
(see READ-CALIBRATION), gives the matrices it names SPEC 10's
outlier-aware scales (still plain Q8_0).  Answers a list of (name type) of the
written tensors, in file order, and the number of F16 fall backs."
  (unless (member (string type) '("Q8_0" "q8_0" "Q8-0" "q8-0" "7") :test #'string=)
    (unknown-format-error 'quantize-file type "expected the type q8_0, found ~S" type))
  (let ((f (gguf:read in)))
    (unwind-protect
         (let* ((path (gguf:path f))
                (infos (gguf:tensor-infos f))
                (outliers (if calibration
                              (calibration-outliers calibration f)
                              (make-hash-table :test 'equal)))
                (names (llama-tensor-order (mapcar #'gguf:tensor-info-name infos)))
                (report (progress-reporter (length names)))
                (done 0)
                (fallbacks 0)
                (tensors '())
                (current nil))
           (with-tensor-named (path current)
            (dolist (name names)
             (setf current name)
             (let* ((info (gguf:tensor-info f name))
                    (ne (gguf:tensor-info-dims info))
                    (src-type (gguf:tensor-info-type info))
                    (tt (find-tensor-type (gguf:tensor-info-type-id info)))
                    (quantized (and tt (eq :q8_0 (tensor-type-keyword tt)))))
               (unless tt
                 (tensor-data-error path name "has type ~A: expected F32, F16, BF16 or Q8_0 ~
(rontolisp quantize does not requantize other types)" src-type))
               (let* ((data (gguf:tensor f name))
                      (bad (and (not quantized) (first-non-finite data))))
                 (when bad
                   (tensor-data-error path name "has invalid data: expected finite values, found ~
~A at element ~D (byte ~D)"
                                     (let ((x (row-major-aref
                                               (if (arrayp data) data (half-array-to-single data))
                                               bad)))
                                       (if (ext:float-nan-p x) "NaN" "an infinity"))
                                     bad
                                     (+ (gguf:data-offset f) (gguf:tensor-info-offset info)
                                        (* bad (tensor-type-block-bytes tt)))))
                 (let ((dims (trim-dims ne))
                       (result data))
                   (when (and (quantizable-tensor-p name ne) (not quantized))
                     (if (zerop (mod (first ne) 32))
                         (setf result
                               (handler-case (quantize (data-as-matrix data ne) 'q8-0
                                                         :outliers (gethash name outliers))
                                 (scale-overflow-error (c)
                                   (tensor-data-error
                                    path name "cannot be quantized: row ~D, block ~D: the Q8_0 ~
scale overflows binary16 (quantized data validation failed, as llama-quantize)"
                                    (scale-overflow-error-row c) (scale-overflow-error-block c)))))
                         (let* ((h (convert-tensor-data data :f16))
                                (over (first-non-finite h)))
                           (when over
                             (tensor-data-error path name "cannot fall back to F16: element ~D ~
overflows binary16 (quantized data validation failed, as llama-quantize)" over))
                           (setf result h)
                           (incf fallbacks))))
                   (push (list name result :dims dims) tensors))))
             (funcall report (incf done) name))
            (setf current nil))
           (let* ((metadata (append (remove-if (lambda (e)
                                                 (member (first e) '("general.quantization_version"
                                                                     "general.file_type")
                                                         :test #'string=))
                                               (gguf:metadata f))
                                    (list (list "general.quantization_version" :u32 2)
                                          (list "general.file_type" :u32 7))))
                  (out-file (gguf:make-file :metadata metadata
                                            :tensors (reverse tensors)
                                            :alignment (gguf:alignment f))))
             (gguf:write out out-file)
             (values
              (mapcar (lambda (e)
                       (let ((d (second e)))
                         (list (first e) (tensor-type-name (tensor-type-of d)))))
                      (reverse tensors))
              fallbacks)))
      (gguf:close f))))

(define-command "quantize" (in out type)
    (:usage "IN.gguf OUT.gguf q8_0 [--calibration CAL.gguf]"
     :summary "quantize a GGUF file as llama-quantize does (same tensor types and bytes)"
     :details "Tensors of two or more dimensions whose name ends in `weight' (norms,
token types and position embeddings excepted) become Q8_0, or F16 when their
rows are not a multiple of 32; the others keep their type.  The type may also
be written Q8_0 or 7 (llama-quantize's ftype).  With --calibration, the
matrices the calibration file names get outlier-aware scales (still Q8_0)."
     :options ((calibration "--calibration CAL"
                            :help "a calibration file: max |x| per input channel of each
matrix, one F32 vector named after its tensor")))
  (unless (member type '("q8_0" "Q8_0" "7") :test #'string=)
    (usage-error "expected the type q8_0 (or Q8_0, 7), found ~S" type))
  (multiple-value-bind (written fallbacks) (quantize-file in out :type :q8_0
                                                               :calibration calibration)
    (format t "~A: ~D tensor~:P, ~D Q8_0, ~D F16 fall back~:P~%"
            out (length written)
            (count (tensor-type-name (find-tensor-type :q8_0)) written
                   :key #'second :test #'string=)
            fallbacks)
    0))
