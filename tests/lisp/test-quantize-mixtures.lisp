;;;; test-quantize-mixtures.lisp - `rontolisp quantize' to every file type
;;;; llama-quantize makes without an importance matrix writes llama-quantize's
;;;; file byte for byte: against the tracked goldens of tests/golden/quants/
;;;; (every ftype, both inputs; never skipped), and live against
;;;; build/tools/llama_quantize (llama-quantize over the fetched libllama)
;;;; with its options --leave-output-tensor, --override-kv and
;;;; --allow-requantize and thread counts 1 and 2 (skipped without the
;;;; library, failing under CI=true).

(in-package "RONTOLISP-TESTS")

(def-suite quantize-mixtures :in all
  :description "rontolisp quantize to every llama-quantize ftype, against llama-quantize.")
(in-suite quantize-mixtures)

(defparameter *quant-golden-ftype-numbers*
  '(("q4_0" . "2") ("q4_1" . "3") ("q5_0" . "8") ("q5_1" . "9") ("q2_k" . "10")
    ("q3_k_s" . "11") ("q3_k_m" . "12") ("q3_k_l" . "13") ("q4_k_s" . "14") ("q4_k_m" . "15")
    ("q5_k_s" . "16") ("q5_k_m" . "17") ("q6_k" . "18") ("iq4_nl" . "25") ("iq4_xs" . "30"))
  "llama.cpp's ftype number of each golden ftype (include/llama.h).")

(defun first-difference (a b)
  "A description of where the octet vectors A and B first differ."
  (let ((m (mismatch a b)))
    (format nil "lengths ~D and ~D, first difference at byte ~A" (length a) (length b) m)))

(test quantize-mixtures-match-the-goldens
  "For both golden inputs and every ftype, the whole output file equals
llama-quantize's golden, the ftype given by name (upper case for the first
input) and by number (for the second), on 1 and on 2 threads."
  (let ((checked 0))
    (loop for input in '("quant_main" "quant_odd")
          for by-number in '(nil t)
          do (loop for (ftype . number) in *quant-golden-ftype-numbers*
                   for threads from 1
                   for in = (golden (format nil "quants/~A.f32.gguf" input))
                   for ref = (golden (format nil "quants/~A.~A.gguf" input ftype))
                   do (with-tracked-fixture (in)
                        (with-tracked-fixture (ref)
                          (let ((out (tmp-path "mix.gguf")))
                            (unwind-protect
                                 (progn
                                   (rontolisp:quantize-file
                                    in out :type (if by-number number (string-upcase ftype))
                                           :threads (1+ (mod threads 2)))
                                   (let ((ours (file-octets out)) (theirs (file-octets ref)))
                                     (is (equalp theirs ours) "~A ~A: ~A" input ftype
                                         (first-difference theirs ours)))
                                   (incf checked))
                              (ignore-errors (delete-file out))))))))
    (is (= 30 checked))))

(test quantize-mixtures-command-line
  "The command line: a file type by name or number with the thread count
after it writes the golden; a dry run prints the plan with the mixture's
types; file types that need an importance matrix, or that quantize does
not write, and a bad thread count are refused with exit 2 and no file."
  (let ((in (golden "quants/quant_main.f32.gguf"))
        (ref (golden "quants/quant_main.q4_k_m.gguf"))
        (out (tmp-path "cli.gguf")))
    (with-tracked-fixture (in)
      (with-tracked-fixture (ref)
        (unwind-protect
             (progn
               (is (= 0 (run-exe (list "quantize" in out "Q4_K" "2"))))
               (is (equalp (file-octets ref) (file-octets out)))
               (delete-file out)
               (multiple-value-bind (code stdout) (run-exe (list "quantize" "--dry-run" in out "15"))
                 (is (= 0 code))
                 (is (contains stdout "output.weight                        F32   -> Q6_K") "~A" stdout)
                 (is (contains stdout "blk.0.attn_v.weight                  F32   -> Q6_K") "~A" stdout)
                 (is (contains stdout "blk.1.attn_v.weight                  F32   -> Q4_K") "~A" stdout)
                 (is (not (probe-file out))))
               (loop for (args . needle)
                       in '((("iq2_xxs") . "needs an importance matrix")
                            (("q2_k_s") . "needs an importance matrix")
                            (("tq1_0") . "does not write")
                            (("q4_k_m" "two") . "thread count")
                            (("q4_k_m" "--override-kv" "general.name=text:x") . "int:, float:, bool: or str:")
                            (("q4_k_m" "--override-kv" "llama.block_count=int:4x") . "expected an integer")
                            (("q4_k_m" "--override-kv" "x=bool:yes") . "true or false")
                            (("q4_k_m" "--override-kv" "x=float:1e99") . "f32 range")
                            ;; the Lisp reader once built this bignum for ever
                            (("q4_k_m" "--override-kv" "x=float:1e999999999") . "f32 range")
                            (("q4_k_m" "--override-kv" "x=int:1e3") . "from -4294967295 to 4294967295")
                            ;; nested counts once took all memory
                            (("q4_k_m" "--tensor-type" "((a{1000}){1000}){1000}=q8_0")
                             . "--tensor-type: regular expression"))
                     do (multiple-value-bind (code stdout stderr)
                            (run-exe (append (list "quantize" in out) args))
                          (declare (ignore stdout))
                          (is (= 2 code) "~S exited ~D" args code)
                          (is (contains stderr needle) "~S: ~A" args stderr)
                          (is (not (probe-file out))))))
          (ignore-errors (delete-file out)))))))

(test quantize-mixtures-kv-overrides
  "--override-kv as llama-quantize reads it: int written as u32 of the
magnitude, float as f32, bool, str; each key removed and appended."
  (is (equal '("a.b" :u32 7) (command-line::parse-kv-override "a.b=int:-7")))
  (is (equal '("a" :f32 0.25) (command-line::parse-kv-override "a=float:.25")))
  (is (equal '("a" :bool nil) (command-line::parse-kv-override "a=bool:false")))
  (is (equal '("a" :string "x=y") (command-line::parse-kv-override "a=str:x=y")))
  (is (equal '("a" :f32 1.0e-3) (command-line::parse-kv-override "a=float:1e-3")))
  (dolist (bad '("=int:1" "a" "a=int:" "a=int:99999999999" "a=float:1.5.2" "a=float:e3"
                 "a=float:1e39" "a=float:1e999999999" "a=float:-1e99999999999999"
                 "general.alignment=int:64"))
    (signals rontolisp:usage-error (command-line::parse-kv-override bad)))
  (is (equal '(("c" :u32 3) ("b" :string "z") ("a" :bool t))
             (command-line::apply-kv-overrides '(("a" :u32 1) ("b" :u32 2) ("c" :u32 3))
                                            '(("b" :string "z") ("a" :bool t))))))

(defun quantize-both (in options tail)
  "Run `rontolisp quantize OPTIONS IN OUT TAIL' and build/tools/llama_quantize
with the same arguments (TAIL: the ftype and thread count); answer (values
our-octets their-octets), or NIL after SKIP-REFERENCE when the tool cannot
run."
  (let ((a (tmp-path "ours.gguf")) (b (format nil "~A.gguf" (tmp-path "theirs"))))
    (unwind-protect
         (multiple-value-bind (code text) (apply #'run-llama-quantize (append options (list in b) tail))
           (cond ((null code)
                  (skip-reference "build/tools/llama_quantize is not built (make tools)"))
                 ((eql code 3)
                  (skip-reference "llama.cpp's libraries are missing: ~A"
                                  (string-trim '(#\Newline) text)))
                 (t
                  (is (eql 0 code) "llama_quantize ~S: ~A" options text)
                  (multiple-value-bind (ours stdout stderr)
                      (run-exe (append (list "quantize") options (list in a) tail))
                    (declare (ignore stdout))
                    (is (eql 0 ours) "rontolisp quantize ~S: ~A" options stderr))
                  (values (and (probe-file a) (file-octets a))
                          (and (probe-file b) (file-octets b))))))
      (ignore-errors (delete-file a))
      (ignore-errors (delete-file b)))))

(test quantize-mixtures-options-against-llama-quantize
  "Live, against llama-quantize over the fetched libllama: --leave-output-tensor
with --override-kv of every type (block_count among them, which the
ffn_down rule reads) on 1 thread; --pure; --output-tensor-type and
--token-embedding-type; --allow-requantize from a Q8_0 input to
Q5_K_M and from Q4_K_M to Q6_K on 2; the whole files equal."
  (let* ((in (golden "quants/quant_main.f32.gguf"))
         (q8 (tmp-path "in-q8.gguf"))
         (q4 (tmp-path "in-q4.gguf")))
    (with-tracked-fixture (in)
      (unwind-protect
           (progn
             (let ((kv '("--override-kv" "general.name=str:overridden"
                         "--override-kv" "llama.block_count=int:4"
                         "--override-kv" "test.scale=float:0.125"
                         "--override-kv" "test.flag=bool:true")))
               (multiple-value-bind (ours theirs)
                   (quantize-both in (cons "--leave-output-tensor" kv) '("q4_k_m" "1"))
                 (when theirs
                   (is (equalp theirs ours) "--leave-output-tensor --override-kv: ~A"
                       (first-difference theirs ours)))))
             (loop for (options tail) in '((("--pure") ("q3_k_s" "1"))
                                           (("--output-tensor-type" "q5_k" "--token-embedding-type"
                                             "q4_0")
                                            ("q4_k_m" "2")))
                   do (multiple-value-bind (ours theirs) (quantize-both in options tail)
                        (when theirs
                          (is (equalp theirs ours) "~S ~S: ~A" options tail
                              (first-difference theirs ours)))))
             (rontolisp:quantize-file in q8 :type "q8_0")
             (rontolisp:quantize-file in q4 :type "q4_k_m")
             (loop for (src ftype) in (list (list q8 "q5_k_m") (list q4 "q6_k"))
                   do (multiple-value-bind (ours theirs)
                          (quantize-both src '("--allow-requantize") (list ftype "2"))
                        (when theirs
                          (is (equalp theirs ours) "requantize to ~A: ~A" ftype
                              (first-difference theirs ours)))))
             ;; both refuse without the flag
             (multiple-value-bind (code stdout stderr)
                 (run-exe (list "quantize" q8 (tmp-path "never.gguf") "q4_k_m"))
               (declare (ignore stdout))
               (is (= 1 code))
               (is (contains stderr "--allow-requantize") "~A" stderr)))
        (ignore-errors (delete-file q8))
        (ignore-errors (delete-file q4))))))
