;;;; test-calibration.lisp - the calibration file and `rontolisp quantize
;;;; --calibration': the matrices it names get exactly QUANTIZE's
;;;; outlier-aware bytes for the columns OUTLIER-COLUMNS picks, every other
;;;; tensor is what plain quantize writes, and a calibration file that does
;;;; not fit the model is refused with exit 1, one line and no output.

(in-package "RONTOLISP-TESTS")

(def-suite calibration :in all :description "Calibration files and quantize --calibration.")
(in-suite calibration)

(defun magnitude-vector (n massive)
  "N channel magnitudes near 1 with the channels MASSIVE at 40."
  (let ((v (make-array n :element-type 'single-float)))
    (dotimes (j n v)
      (setf (aref v j) (if (member j massive) 40.0 (+ 1.0 (* 0.001 j)))))))

(defun write-calibration (path &rest entries)
  "Write a calibration file PATH of ENTRIES, each (tensor-name data)."
  (gguf:write path (gguf:make-file :tensors entries)))

(defmacro with-tmp-files ((&rest vars) &body body)
  `(let ,(loop for v in vars collect `(,v (tmp-path ,(format nil "~(~A~).gguf" v))))
     (unwind-protect (progn ,@body)
       ,@(loop for v in vars collect `(ignore-errors (delete-file ,v))))))

(test calibration-round-trips
  (with-tmp-files (cal)
    (write-calibration cal (list "a.weight" (magnitude-vector 64 '(3)))
                       (list "b.weight" (magnitude-vector 32 '())))
    (let ((c (model::read-calibration cal)))
      (is (equal '("a.weight" "b.weight") (mapcar #'car c)))
      (is (equalp (magnitude-vector 64 '(3)) (cdr (first c))))
      (is (equal '(3) (rontolisp:outlier-columns (cdr (first c))))))))

(test quantize-with-calibration-uses-outlier-scales-only-where-named
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (with-tmp-files (cal plain aware)
      (let ((in (golden "q8_main.f32.gguf"))
            (named '(("blk.0.gauss_64x1024.weight" 1024 (3 500 777))
                     ("output.weight" 64 (10)))))
        (apply #'write-calibration cal
               (loop for (name n massive) in named
                     collect (list name (magnitude-vector n massive))))
        (is (= 0 (run-exe (list "quantize" in plain "q8_0"))))
        (is (= 0 (run-exe (list "quantize" in aware "q8_0" "--calibration" cal))))
        (gguf:with-file (src in)
          (gguf:with-file (p plain)
            (gguf:with-file (a aware)
              (is (equal (gguf:tensor-names p) (gguf:tensor-names a)))
              (dolist (name (gguf:tensor-names a))
                (let ((entry (assoc name named :test #'string=))
                      (ta (gguf:tensor a name))
                      (tp (gguf:tensor p name)))
                  (cond (entry
                         (let ((want (rontolisp:quantize
                                      (gguf:tensor src name) 'q8-0
                                      :outliers (rontolisp:outlier-columns
                                                 (magnitude-vector (second entry) (third entry))))))
                           (is (equal (third entry) (rontolisp:outlier-columns
                                                     (magnitude-vector (second entry)
                                                                       (third entry)))))
                           (is (equalp (matrix-octets want) (matrix-octets ta)) "~A" name)
                           (is (not (equalp (matrix-octets tp) (matrix-octets ta)))
                               "~A: the calibration changed no block" name)))
                        ((rontolisp:quantized-matrix-p tp)
                         (is (equalp (matrix-octets tp) (matrix-octets ta)) "~A" name))
                        (t (is (equalp tp ta) "~A" name)))))
              (is (equalp (gguf:metadata p) (gguf:metadata a))))))))))

(test quantize-refuses-a-calibration-that-does-not-fit
  (with-tracked-fixture ((golden "q8_main.f32.gguf"))
    (let ((in (golden "q8_main.f32.gguf")))
      (dolist (case (list (list (list (list "blk.9.nothing.weight" (magnitude-vector 64 '())))
                                "names no tensor")
                          (list (list (list "blk.0.attn_norm.weight" (magnitude-vector 64 '())))
                                "is not a matrix")
                          (list (list (list "output.weight" (magnitude-vector 32 '())))
                                "has 32 channel magnitudes")
                          (list (list (list "output.weight" (rontolisp:make-float16-array
                                                             (magnitude-vector 64 '()))))
                                "expected a 1-D F32 vector")
                          (list (list (list "output.weight"
                                            (let ((v (magnitude-vector 64 '())))
                                              (setf (aref v 5) -1.0)
                                              v)))
                                "finite non-negative")))
        (destructuring-bind (entries message) case
          (with-tmp-files (cal out)
            (apply #'write-calibration cal entries)
            (let ((c (handler-case (progn (model::read-calibration cal)
                                          (gguf:with-file (f in)
                                            (model::calibration-outliers cal f))
                                          nil)
                       (rontolisp:tensor-data-error (c) c))))
              (is (typep c 'rontolisp:tensor-data-error) "~A" message)
              (is (search message (princ-to-string c)) "~A: ~A" message c))
            (is (= 1 (run-exe (list "quantize" in out "q8_0" "--calibration" cal))))
            (is (not (probe-file out)))))))))

(test calibrate-shows-progress-on-a-terminal
  "`calibrate' shows each sequence as it runs on a terminal's stderr (as
convert and quantize show theirs); through a pipe stderr stays empty."
  (with-tmp-files (model cal)
    (is (= 0 (run-exe (list "convert" "--random" "s1-pico" model "--encoder-only" "--type" "f32"))))
    (multiple-value-bind (code output)
        (pty-session '("expect calibrating") :args (list "calibrate" model cal) :seconds 120)
      (is (= 0 code) "~A" output)
      (is (contains output "calibrating: a sequence of 1 token") "~A" output)
      (is (search "[1/" output) "~A" output))
    (multiple-value-bind (code out err) (run-exe (list "calibrate" model cal))
      (is (= 0 code) "~A" err)
      (is (contains out (format nil "~A: 8 matrices, " cal)) "~A" out)
      (is (= 1 (count #\Newline out)) "~A" out)
      (is (string= "" err) "~A" err))))

(test calibrate-show-prints-each-matrix-outlier-columns
  "--show prints a line per matrix with the outlier columns its recorded
magnitudes give (OUTLIER-COLUMNS), before the summary."
  (with-tmp-files (model cal)
    (is (= 0 (run-exe (list "convert" "--random" "s1-pico" model "--encoder-only" "--type" "f32"
                            "--massive" "2"))))
    (multiple-value-bind (code out err) (run-exe (list "calibrate" model cal "--show"))
      (is (= 0 code) "~A" err)
      (let ((lines (split-lines out)))
        (is (= 9 (length lines)) "~A" out)
        (loop for (name . magnitudes) in (model::read-calibration cal)
              for columns = (rontolisp::outlier-columns magnitudes)
              do (is (member (if columns
                                 (format nil "~A: ~D outlier column~:P:~{ ~D~}"
                                         name (length columns) columns)
                                 (format nil "~A: no outlier columns" name))
                             lines :test #'string=)
                     "~A not in ~A" name out))
        (is (some (lambda (l) (search "outlier column" l)) lines) "~A" out)
        (is (contains (car (last lines)) "8 matrices") "~A" out)))))

(test calibrate-reports-progress-in-a-log
  "Without a terminal, `calibrate' writes a plain progress line at most
every RL_PROGRESS_SECONDS (0: one per sequence) and a summary at the end."
  (with-tmp-files (model cal)
    (is (= 0 (run-exe (list "convert" "--random" "s1-pico" model "--encoder-only" "--type" "f32"))))
    (multiple-value-bind (code out err)
        (sh "RL_PROGRESS_SECONDS=0 exec \"$0\" calibrate \"$1\" \"$2\"" model cal)
      (is (= 0 code) "~A" err)
      (is (contains err (format nil "[1/")) "~A" err)
      (is (contains err "] calibrating: a sequence of 1 token") "~A" err)
      (is (not (find #\Return err)) "~A" err)
      (is (not (find #\Esc err)) "~A" err)
      (is (contains out (format nil "~A: 8 matrices, " cal)) "~A" out))))
