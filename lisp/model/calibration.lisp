;;;; calibration.lisp - the calibration file of outlier-aware Q8_0 (doc/outliers.md)
;;;; and what `rontolisp quantize --calibration' takes from it.
;;;;
;;;; A calibration file is a GGUF file with one 1-D F32 tensor per weight
;;;; matrix, named after the matrix's tensor, holding max |x| per input
;;;; channel of that matrix's product as the f32 model ran it (one value per
;;;; column of the matrix).  GGUF, so that it is written and inspected with
;;;; the tools that handle models.

(in-package "MODEL")

(defun read-calibration (path)
  "The calibration file PATH as a list of (tensor-name . magnitudes), in
file order, MAGNITUDES a (simple-array single-float (*)).  Signals
GGUF:GGUF-ERROR for a file that is not GGUF and TENSOR-DATA-ERROR for a
tensor that is not a 1-D F32 vector of finite non-negative values."
  (gguf:with-file (f path)
    (loop for info in (gguf:tensor-infos f)
          for name = (gguf:tensor-info-name info)
          collect (let ((dims (gguf:tensor-info-dims info))
                        (type (gguf:tensor-info-type info)))
                    (unless (and (string= type "F32") (= 1 (length dims)))
                      (tensor-data-error path name "is ~A ~S: expected a 1-D F32 vector of ~
channel magnitudes" type dims))
                    (let* ((v (gguf:tensor f name))
                           (bad (or (first-non-finite v) (position-if #'minusp v))))
                      (when bad
                        (tensor-data-error path name "has ~A at element ~D: expected finite ~
non-negative channel magnitudes"
                                           (if (first-non-finite v) "a NaN or infinity" (aref v bad))
                                           bad))
                      (cons name (copy-seq v)))))))

(defun calibration-outliers (calibration f)
  "A hash table from each tensor name the calibration file CALIBRATION (a
path) names to its outlier columns (OUTLIER-COLUMNS of its magnitudes),
after checking that the GGUF file F has every such tensor, that QUANTIZE-FILE
makes it Q8_0 from F32, F16 or BF16, and that it has as many columns as
there are magnitudes.  Signals TENSOR-DATA-ERROR naming CALIBRATION and the
tensor otherwise."
  (let ((entries (read-calibration calibration)))
    (loop for (name . magnitudes) in entries
          do (let ((info (find name (gguf:tensor-infos f) :key #'gguf:tensor-info-name
                                                           :test #'string=)))
               (unless info
                 (tensor-data-error calibration name "names no tensor of ~A" (gguf:path f)))
               (let ((ne (gguf:tensor-info-dims info))
                     (tt (find-tensor-type (gguf:tensor-info-type-id info))))
                 (unless (and tt (member (tensor-type-keyword tt) '(:f32 :f16 :bf16))
                              (quantizable-tensor-p name ne)
                              (zerop (mod (first ne) 32)))
                   (tensor-data-error calibration name "is not a matrix of ~A that quantize ~
makes Q8_0 (~A ~S): expected an F32, F16 or BF16 weight matrix with rows of a multiple of 32"
                                      (gguf:path f) (gguf:tensor-info-type info) ne))
                 (unless (= (length magnitudes) (first ne))
                   (tensor-data-error calibration name "has ~D channel magnitudes: expected ~D, ~
the columns of the tensor in ~A" (length magnitudes) (first ne) (gguf:path f))))))
    (calibration-outlier-table entries)))

(defun calibration-outlier-table (calibration)
  "A hash table from each tensor name of CALIBRATION, a list of (name .
magnitudes) as MODEL:CALIBRATE and READ-CALIBRATION answer it, to its
outlier columns (OUTLIER-COLUMNS of its magnitudes)."
  (let ((table (make-hash-table :test 'equal)))
    (loop for (name . magnitudes) in calibration
          do (setf (gethash name table) (outlier-columns magnitudes)))
    table))
