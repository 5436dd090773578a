;;;; test-model-quantize.lisp - int8 that keeps its accuracy on a model with
;;;; massive channels (SPEC 10): `convert --type q8_0 --outlier-aware' writes
;;;; the outlier-aware scales of its own calibration as plain Q8_0 that
;;;; llama.cpp loads, and MODEL:LOAD :quantize :q8_0 quantizes an F16/F32
;;;; file in memory with the outlier columns kept in f32.  On s1-nano with 4
;;;; massive channels both are closer to the F32 model than plain Q8_0.

(in-package "RONTOLISP-TESTS")

(def-suite model-quantize :in all
  :description "Outlier-aware Q8_0 files and quantize-at-load.")
(in-suite model-quantize)

(defvar *massive-files* (make-hash-table :test 'equal)
  "Encoder-only s1-nano files with 4 massive channels, written once per run
by `rontolisp convert', keyed by their extra arguments.")

(defun massive-file (&rest args)
  "The path of `convert --random s1-nano --encoder-only --massive 4' with
ARGS (such as \"--type\" \"q8_0\" \"--outlier-aware\"), written on first use."
  (or (gethash args *massive-files*)
      (let ((path (tmp-path (format nil "nano-massive~{~A~}.gguf" args))))
        (multiple-value-bind (code out err)
            (run-exe (append (list "convert" "--random" "s1-nano" path "--encoder-only"
                                   "--massive" "4")
                             args))
          (unless (eql code 0)
            (error "convert ~{~A~^ ~} failed (~A): ~A~A" args code out err)))
        (setf (gethash args *massive-files*) path))))

(defun tensor-bytes (f name)
  (copy-seq (gguf:tensor-octets f name)))

;;; `convert --type q8_0 --outlier-aware'.

(test convert-outlier-aware-writes-its-calibration-scales
  "Every encoder matrix holds QUANTIZE :outliers of the F32 model's values
with the columns OUTLIER-COLUMNS picks from MODEL:CALIBRATE of the F32
model; every other tensor is byte for byte plain --type q8_0's."
  (let* ((f32 (massive-file "--type" "f32"))
         (plain (massive-file "--type" "q8_0"))
         (aware (massive-file "--type" "q8_0" "--outlier-aware"))
         (calibration (model:calibrate f32))
         (changed 0))
    (is (= 16 (length calibration)))
    (gguf:with-file (s f32)
      (gguf:with-file (p plain)
        (gguf:with-file (a aware)
          (is (equal (gguf:tensor-names p) (gguf:tensor-names a)))
          (is (equal (mapcar #'gguf:tensor-info-type (gguf:tensor-infos p))
                     (mapcar #'gguf:tensor-info-type (gguf:tensor-infos a))))
          (dolist (name (gguf:tensor-names a))
            (let ((entry (assoc name calibration :test #'string=)))
              (if entry
                  (let ((want (rontolisp:quantize (gguf:tensor s name) 'q8-0
                                                  :outliers (rontolisp:outlier-columns
                                                             (cdr entry)))))
                    (is (equalp (rontolisp:quantized-matrix-octets want) (tensor-bytes a name))
                        "~A: not the outlier-aware quantization of its calibration" name)
                    (unless (equalp (tensor-bytes p name) (tensor-bytes a name))
                      (incf changed)))
                  (is (equalp (tensor-bytes p name) (tensor-bytes a name))
                      "~A: differs from plain q8_0" name)))))))
    ;; The massive channels feed the attention and MLP inputs of every layer.
    (is (>= changed 8) "only ~D encoder matrices changed" changed)))

(test convert-outlier-aware-loads-in-llama-cpp
  "llama.cpp's loader reads the outlier-aware file, and its encoder agrees
with ours on it as it does on plain Q8_0 files."
  (let* ((aware (massive-file "--type" "q8_0" "--outlier-aware"))
         (ids (token-sequence 40 :vocab 2048))
         (ref (llama-or-skip aware (list ids))))
    (when ref
      (let ((ours (model:encode (model:load aware) ids :gelu :tanh)))
        (is (equal (array-dimensions ours) (array-dimensions (cdr (first ref)))))
        (multiple-value-bind (rel cos) (relative-error ours (cdr (first ref)))
          (format t "~&  s1-nano --massive 4 outlier-aware Q8_0 vs llama.cpp: max difference ~
~,3e of the largest, cosine ~,8F~%" rel cos)
          (is (< rel 2d-2) "max difference ~,3e of the largest" rel))))))

(test convert-outlier-aware-wants-q8_0
  (multiple-value-bind (code out err)
      (run-exe (list "convert" "--random" "s1-pico" (tmp-path "never.gguf") "--type" "f16"
                     "--outlier-aware"))
    (declare (ignore out))
    (is (= 2 code))
    (is (contains err "--outlier-aware goes with --type q8_0"))))
