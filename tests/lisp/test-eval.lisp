;;;; test-eval.lisp - `rontolisp eval': every way of running the encoder gets
;;;; a row, and each row's figures are those of the model run the way it
;;;; names, recomputed here from files `rontolisp convert' writes.

(in-package "RONTOLISP-TESTS")

(def-suite eval :in all :description "rontolisp eval.")
(in-suite eval)

(defun pico-massive-file (&rest args)
  "`convert --random s1-pico --encoder-only --massive 4' with ARGS, written
to a fresh temporary file."
  (let ((path (tmp-path (format nil "pico-massive~{~A~}.gguf" args))))
    (assert (eql 0 (run-exe (append (list "convert" "--random" "s1-pico" path "--encoder-only"
                                          "--massive" "4")
                                    args))))
    path))

(defun eval-json (&rest args)
  (multiple-value-bind (code out err) (run-exe (append (list "eval") args (list "--json")))
    (unless (eql code 0) (error "eval ~{~A~^ ~} failed (~A): ~A" args code err))
    (yason:parse out)))

(defun close-to (a b)
  (<= (abs (- a b)) (* 1d-9 (max 1d0 (abs a) (abs b)))))

(test eval-rows-are-the-figures-of-each-way
  (let* ((json (eval-json "--random" "s1-pico" "--massive" "4" "--sequences" "3" "--reps" "1"))
         (rows (gethash "rows" json))
         (f32 (pico-massive-file "--type" "f32"))
         (files (list (cons "Q8_0 file" (pico-massive-file "--type" "q8_0"))
                      (cons "outlier-aware Q8_0 file"
                            (pico-massive-file "--type" "q8_0" "--outlier-aware"))
                      (cons "F16 file" (pico-massive-file "--type" "f16")))))
    (unwind-protect
         (let* ((reference (model:load f32))
                (sequences (subseq (rontolisp::calibration-sequences
                                    (model:hyperparameters reference))
                                   0 3))
                (refs (mapcar (lambda (ids) (model:encode reference ids)) sequences)))
           (is (equal "random s1-pico --massive 4 --seed 1" (gethash "source" json)))
           (is (= 3 (gethash "sequences" json)))
           (is (equal '(("F32" nil) ("F16 file" nil) ("Q8_0 file" "q8") ("Q8_0 file" "q8x2")
                        ("outlier-aware Q8_0 file" "q8") ("outlier-aware Q8_0 file" "q8x2")
                        ("quantize at load" "q8") ("quantize at load" "q8x2"))
                      (mapcar (lambda (r) (list (gethash "way" r) (gethash "activations" r)))
                           rows)))
           (loop for r in rows
                 do (is (plusp (gethash "us_per_sequence" r)))
                    (is (< 0.99 (gethash "token_cosine" r) 1.0000001))
                    (is (< 0.99 (gethash "pooled_cosine" r) 1.0000001)))
           (is (zerop (gethash "token_max_abs_error" (first rows))))
           ;; Each row again, from the files the converter writes and from
           ;; model:load :quantize.
           (loop for r in (rest rows)
                 for way = (gethash "way" r)
                 for act = (if (equal (gethash "activations" r) "q8x2") :q8x2 :q8)
                 for encoder = (if (equal way "quantize at load")
                                   (model:load f32 :quantize :q8_0)
                                   (model:load (cdr (assoc way files :test #'equal))))
                 do (let ((token 0d0) (pooled 0d0))
                      (loop for ids in sequences for ref in refs
                            do (let ((h (model:encode encoder ids :activations act)))
                                 (setf token (max token (rontolisp::hidden-state-error h ref))
                                       pooled (max pooled (rontolisp::hidden-state-error
                                                           (rontolisp::pool h :mean)
                                                           (rontolisp::pool ref :mean))))))
                      (is (close-to token (gethash "token_max_abs_error" r))
                          "~A ~A: token error ~A, eval says ~A" way act token
                          (gethash "token_max_abs_error" r))
                      (is (close-to pooled (gethash "pooled_max_abs_error" r))
                          "~A ~A: pooled error ~A, eval says ~A" way act pooled
                          (gethash "pooled_max_abs_error" r)))))
      (ignore-errors (delete-file f32))
      (dolist (f files) (ignore-errors (delete-file (cdr f)))))))

(test eval-table-and-usage
  (multiple-value-bind (code out) (run-exe (list "eval" "--random" "s1-pico" "--sequences" "2"
                                                 "--reps" "1"))
    (is (= 0 code))
    (is (contains out "eval: random s1-pico --seed 1, 2 calibration sequences"))
    (is (= 2 (count-if (lambda (l) (search "quantize at load" l)) (split-lines out))))
    (is (= 11 (count-if (lambda (l) (plusp (length l))) (split-lines out)))))
  (dolist (args '(() ("--random" "s1-pico" "x.gguf") ("--random" "s1-pico" "--massive-ratio" "3")
                  ("x.gguf" "--massive" "2") ("x.gguf" "--seed" "2")
                  ("--random" "s1-pico" "--massive" "65") ("--random" "s9")))
    (is (= 2 (run-exe (cons "eval" args))) "eval ~{~A~^ ~} should be a usage error" args))
  (let ((bad (tmp-path "not.gguf")))
    (write-file-string bad "not a GGUF file")
    (unwind-protect
         (multiple-value-bind (code out err) (run-exe (list "eval" bad))
           (declare (ignore out))
           (is (= 1 code))
           (is (contains err bad)))
      (ignore-errors (delete-file bad)))))

(test eval-questions-probability-error
  "With a decision head (--random --questions, or a file that has one) each
way gets max |dp| over the built-in questions: 0 for F32, finite and small
elsewhere, and for the F16 file the difference between the models the
converter writes as F32 and as F16; without a head the column is absent
(null in the JSON)."
  (let ((f32 (tmp-path "eval-head-f32.gguf")) (f16 (tmp-path "eval-head-f16.gguf")))
    (unwind-protect
         (let* ((json (eval-json "--random" "s1-pico" "--questions" "--sequences" "1" "--reps" "1"))
                (rows (gethash "rows" json)))
           (is (equal "random s1-pico --seed 1 --questions" (gethash "source" json)))
           (is (= 8 (gethash "questions" json)))
           (is (zerop (gethash "max_abs_dp" (first rows))))
           (dolist (r (rest rows))
             (is (realp (gethash "max_abs_dp" r)))
             (is (< 0 (gethash "max_abs_dp" r) 0.01) "~A ~A: ~A" (gethash "way" r)
                 (gethash "activations" r) (gethash "max_abs_dp" r)))
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" f32 "--type" "f32"))))
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" f16 "--type" "f16"))))
           (flet ((decisions (path)
                    (let ((m (model:load path)))
                      (mapcar (lambda (q) (model:decide m q)) model:*questions*))))
             (is (= (rontolisp::max-probability-error (decisions f16) (decisions f32))
                    (gethash "max_abs_dp" (second rows)))))
           ;; A file with a head gets the column without --questions.
           (let ((file-rows (gethash "rows" (eval-json f32 "--sequences" "1" "--reps" "1"))))
             (is (equal (mapcar (lambda (r) (gethash "max_abs_dp" r)) rows)
                        (mapcar (lambda (r) (gethash "max_abs_dp" r)) file-rows))))
           (multiple-value-bind (code out) (run-exe (list "eval" "--random" "s1-pico" "--questions"
                                                          "--sequences" "1" "--reps" "1"))
             (is (= 0 code))
             (is (contains out "max |Δp|"))))
      (ignore-errors (delete-file f32))
      (ignore-errors (delete-file f16))))
  (let ((rows (gethash "rows" (eval-json "--random" "s1-pico" "--sequences" "1" "--reps" "1"))))
    (is (every (lambda (r) (multiple-value-bind (v found) (gethash "max_abs_dp" r)
                             (and found (null v))))
               rows))))
