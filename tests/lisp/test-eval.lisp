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
                (sequences (subseq (model::calibration-sequences
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
                                 (setf token (max token (command-line::hidden-state-error h ref))
                                       pooled (max pooled (command-line::hidden-state-error
                                                           (model::pool h :mean)
                                                           (model::pool ref :mean))))))
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
             (is (= (command-line::max-probability-error (decisions f16) (decisions f32))
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

(test eval-reference-measures-the-stored-file
  "With --reference ORIG.gguf the file as stored gets the first row,
measured against ORIG.gguf: an F16 file against the F32 file of the same
model shows a non-zero error (the same as the F16 way made from the
reference), the F32 file against itself none, a Q8_0 file its q8 error and a
K-quant file a row of its own; the ways are made from the reference.  A
reference that is not the same model is refused naming the first
difference, and --reference without FILE.gguf is a usage error."
  (let* ((f32 (pico-massive-file "--type" "f32"))
         (f16 (pico-massive-file "--type" "f16"))
         (q8 (pico-massive-file "--type" "q8_0"))
         (q4k (tmp-path "pico-massive-q4_k_m.gguf"))
         (other (tmp-path "eval-reference-other.gguf")))
    (unwind-protect
         (flet ((rows (file)
                  (let ((json (eval-json file "--reference" f32 "--sequences" "2" "--reps" "1")))
                    (is (equal f32 (gethash "reference" json)))
                    (gethash "rows" json)))
                (way (rows name &optional act)
                  (find-if (lambda (r) (and (equal name (gethash "way" r))
                                            (equal act (gethash "activations" r))))
                           rows)))
           (assert (eql 0 (run-exe (list "quantize" f32 q4k "q4_k_m"))))
           (assert (eql 0 (run-exe (list "convert" "--random" "s1-nano" other "--encoder-only"
                                         "--type" "f32"))))
           (let ((rows (rows f16)))
             (is (equal "file as stored" (gethash "way" (first rows))))
             (is (null (gethash "activations" (first rows))))
             (is (plusp (gethash "token_max_abs_error" (first rows))))
             (is (plusp (gethash "pooled_max_abs_error" (first rows))))
             (is (close-to (gethash "token_max_abs_error" (first rows))
                           (gethash "token_max_abs_error" (way rows "F16 file"))))
             (is (zerop (gethash "token_max_abs_error" (way rows "F32"))))
             (is (= 9 (length rows))))
           (let ((stored (first (rows f32))))
             (is (zerop (gethash "token_max_abs_error" stored)))
             (is (zerop (gethash "pooled_max_abs_error" stored))))
           (let ((rows (rows q8)))
             (is (equal "q8" (gethash "activations" (first rows))))
             (is (close-to (gethash "token_max_abs_error" (first rows))
                           (gethash "token_max_abs_error" (way rows "Q8_0 file" "q8")))))
           ;; The model directory the F32 file was converted from is the
           ;; same reference.
           (let ((dir (tmp-path "eval-reference-laya")) (out (tmp-path "eval-reference-laya.gguf")))
             (unwind-protect
                  (progn
                    (assert (eql 0 (run-exe (list "convert" "--random" "s1-pico" out "--encoder-only"
                                                  "--massive" "4" "--type" "f32" "--write-laya" dir))))
                    (let ((by-dir (first (gethash "rows" (eval-json f16 "--reference" dir
                                                                     "--sequences" "2" "--reps" "1"))))
                          (by-file (first (rows f16))))
                      (is (equal "file as stored" (gethash "way" by-dir)))
                      (is (= (gethash "token_max_abs_error" by-file)
                             (gethash "token_max_abs_error" by-dir)))))
               (ignore-errors (delete-file out))
               (sh "rm -rf \"$1\"" dir)))
           (let ((stored (first (rows q4k))))
             (is (equal "file as stored" (gethash "way" stored)))
             (is (plusp (gethash "token_max_abs_error" stored))))
           ;; Without --reference the file is its own reference: no stored row.
           (let ((json (eval-json f16 "--sequences" "1" "--reps" "1")))
             (is (multiple-value-bind (v found) (gethash "reference" json) (and found (null v))))
             (is (equal "F32" (gethash "way" (first (gethash "rows" json))))))
           (multiple-value-bind (code out err) (run-exe (list "eval" f16 "--reference" other
                                                              "--sequences" "1" "--reps" "1"))
             (declare (ignore out))
             (is (= 1 code))
             (is (contains err "expected the same model as the reference") "~A" err)
             (is (contains err "token_embd.weight") "~A" err))
           (is (= 2 (run-exe (list "eval" "--random" "s1-pico" "--reference" f32))))
           (multiple-value-bind (code out) (run-exe (list "eval" f16 "--reference" f32
                                                          "--sequences" "1" "--reps" "1"))
             (is (= 0 code))
             (is (contains out (format nil "error against the F32 model of the reference ~A" f32)))
             (is (contains out "file as stored"))))
      (dolist (f (list f32 f16 q8 q4k other)) (ignore-errors (delete-file f))))))
