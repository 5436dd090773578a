;;;; test-quantize-tool.lisp - `rontolisp quantize' writes what llama-quantize
;;;; writes: for every golden input, every tensor has llama-quantize's type,
;;;; dims, order and bytes (read from its output at the offsets gguf-py's
;;;; dumps give, independent of our reader), and the refused inputs fail
;;;; with exit 1, one line and no file.

(in-package "RONTOLISP-TESTS")

(def-suite quantize-tool :in all :description "rontolisp quantize against llama-quantize.")
(in-suite quantize-tool)

(defparameter *quantize-golden*
  '(("q8_main.f32.gguf" "q8_main.q8_0.gguf")
    ("q8_f16src.f16.gguf" "q8_f16src.q8_0.gguf")
    ("q8_bf16src.bf16.gguf" "q8_bf16src.q8_0.gguf")
    ("q8_align64.f32.gguf" "q8_align64.q8_0.gguf"))
  "Golden inputs with llama-quantize's output for each.  Whole files differ
by design: our writer always writes general.alignment (SPEC 5), which
llama-quantize's outputs lack, and at alignment 64 llama-quantize's layout is
wrong; every tensor's type, dims, order and bytes must be equal.")

(defun octets-at (octets start count)
  (subseq octets start (+ start count)))

(defun u64-at (octets pos)
  (loop for i below 8 sum (ash (aref octets (+ pos i)) (* 8 i))))

(test quantize-tool-tensor-choice
  (is (rontolisp::quantizable-tensor-p "blk.0.attn_q.weight" '(64 64)))
  (is (rontolisp::quantizable-tensor-p "blk.0.experts.weight" '(64 4 2)))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.one_row.weight" '(64 1))))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.attn_norm.weight" '(64 64))))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.ffn_gate_inp.weight" '(64 4))))
  (is (not (rontolisp::quantizable-tensor-p "token_types.weight" '(64 3))))
  (is (not (rontolisp::quantizable-tensor-p "position_embd.weight" '(64 512))))
  (is (not (rontolisp::quantizable-tensor-p "blk.0.bias_2d.bias" '(32 4))))
  (is (equal '(64) (rontolisp::trim-dims '(64 1))))
  (is (equal '(1) (rontolisp::trim-dims '(1 1))))
  (is (equal '(64 1 2) (rontolisp::trim-dims '(64 1 2 1)))))

(test quantize-tool-order
  (is (equal '("output.weight" "output_norm.weight" "token_embd.weight"
               "blk.2.a.weight" "blk.10.a.weight" "blk.10.b.weight")
             (rontolisp::llama-tensor-order
              '("blk.10.b.weight" "blk.2.a.weight" "token_embd.weight" "blk.10.a.weight"
                "output_norm.weight" "output.weight")))))

(test quantize-tool-orders-names-as-bytes
  "llama.cpp orders names as byte strings: a byte that is not UTF-8 (held
as U+DC80..U+DCFF) sorts by its own value, 0x80 before the 0xC3 that
starts an e-acute, and a four-byte character after both."
  (let ((raw-80 (format nil "blk.0.~C.weight" (code-char #xdc80)))
        (raw-ff (format nil "blk.0.~C.weight" (code-char #xdcff)))
        (e-acute (format nil "blk.0.~C.weight" (code-char #xe9)))
        (emoji (format nil "blk.0.~C.weight" (code-char #x1f600))))
    (is (equal (list raw-80 e-acute emoji raw-ff "blk.1.a")
               (rontolisp::llama-tensor-order (list "blk.1.a" raw-ff emoji e-acute raw-80))))
    (is (rontolisp::octets< #(1 2) #(1 2 0)))
    (is (not (rontolisp::octets< #(1 2) #(1 2))))
    (is (not (rontolisp::octets< #(2) #(1 9))))))

(test quantize-tool-matches-llama-quantize
  "Every output tensor has the type, dims, order and bytes llama-quantize
wrote; the metadata ends with quantization_version and file_type."
  (let ((checked 0))
    (loop for (in ref) in *quantize-golden*
          do (skip-unless-file ((golden ref))
               (let ((out (tmp-path "q.gguf")))
                 (unwind-protect
                      (progn
                        (is (= 0 (run-exe (list "quantize" (golden in) out "q8_0"))))
                        (let* ((ref-json (golden-json ref))
                               (ours (file-octets out))
                               (refs (file-octets (golden ref))))
                          (gguf:with-file (f out)
                            (is (equal (mapcar (lambda (tj) (gethash "name" tj)) (json-tensors ref-json))
                                       (gguf:tensor-names f))
                                "~A: tensor order differs" in)
                            (is (equal '("general.quantization_version" "general.file_type")
                                       (last (remove "general.alignment" (gguf:keys f)
                                                     :test #'string=)
                                             2)))
                            (is (eql (gguf:alignment f) (gguf:value f "general.alignment")))
                            (is (eql 7 (gguf:value f "general.file_type")))
                            (is (eql 2 (gguf:value f "general.quantization_version")))
                            (dolist (tj (json-tensors ref-json))
                              (let ((info (gguf:tensor-info f (gethash "name" tj))))
                                (is (= (gethash "type_id" tj) (gguf:tensor-info-type-id info)))
                                (is (equal (coerce (gethash "ne" tj) 'list) (gguf:tensor-info-dims info)))
                                (is (zerop (mod (gguf:tensor-info-offset info) (gguf:alignment f))))
                                (is (equalp (octets-at refs (+ (gethash "data_offset" ref-json)
                                                               (gethash "offset" tj))
                                                       (gethash "nbytes" tj))
                                            (octets-at ours (+ (gguf:data-offset f)
                                                               (gguf:tensor-info-offset info))
                                                       (gguf:tensor-info-bytes info)))
                                    "~A ~A: bytes differ" in (gethash "name" tj))
                                (incf checked))))))
                   (ignore-errors (delete-file out))))))
    (is (= 29 checked))))

(test quantize-tool-honours-alignment
  (skip-unless-file ((golden "q8_align64.f32.gguf"))
    (let ((out (tmp-path "a64.gguf")))
      (unwind-protect
           (progn
             (rontolisp:quantize-file (golden "q8_align64.f32.gguf") out)
             (gguf:with-file (f out)
               (is (= 64 (gguf:alignment f)))
               (is (zerop (mod (gguf:data-offset f) 64)))
               (dolist (info (gguf:tensor-infos f))
                 (is (zerop (mod (gguf:tensor-info-offset info) 64))))))
        (ignore-errors (delete-file out))))))

(test quantize-tool-refuses-bad-values
  "NaN input and an overflowing scale: exit 1, one line naming the tensor,
no output file."
  (loop for (in tensor) in '(("q8_nan.f32.gguf" "blk.0.has_nan.weight")
                             ("q8_overflow.f32.gguf" "blk.0.overflow.weight"))
        do (skip-unless-file ((golden in))
             (let ((out (tmp-path "bad.gguf")))
               (multiple-value-bind (code stdout stderr)
                   (run-exe (list "quantize" (golden in) out "q8_0"))
                 (declare (ignore stdout))
                 (is (= 1 code))
                 (is (= 1 (count #\Newline stderr)) "~A: expected one line, found ~S" in stderr)
                 (is (contains stderr tensor))
                 (is (not (probe-file out))))
               (signals rontolisp:tensor-data-error
                 (rontolisp:quantize-file (golden in) out))
               (is (not (probe-file out)))))))

(test quantize-tool-usage
  (is (= 2 (run-exe (list "quantize" "a.gguf"))))
  (is (= 2 (run-exe (list "quantize" "a.gguf" "b.gguf" "q4_k"))))
  (is (= 1 (run-exe (list "quantize" "/nonexistent/in.gguf" (tmp-path "x.gguf") "q8_0")))))

(test quantize-tool-keeps-invalid-utf8-bytes
  "Keys, strings, tokens and tensor names are bytes: quantize writes back
the whole key-value section byte for byte, invalid UTF-8 included, and
tokens that differ only in such bytes stay distinct."
  (let ((in (tmp-path "bytes.gguf")) (out (tmp-path "bytes.q8.gguf")))
    (unwind-protect
         (multiple-value-bind (file kv) (invalid-utf8-gguf)
           (write-octets-file in file)
           (multiple-value-bind (code stdout stderr) (run-exe (list "quantize" in out "q8_0"))
             (declare (ignore stdout))
             (is (= 0 code) "~A" stderr))
           (let ((written (file-octets out)))
             (is (equalp kv (subseq written 24 (+ 24 (length kv))))
                 "the key-value section was not written back byte for byte")
             (is (octets-search *invalid-utf8-tensor-name* written)))
           (gguf:with-file (f out)
             (let ((tokens (coerce (gguf:value f "tokenizer.ggml.tokens") 'list)))
               (is (= (+ 2 (length *invalid-utf8*)) (length tokens)))
               (is (= (length tokens) (length (remove-duplicates tokens :test #'string=)))))
             (is (equal (list "Q8_0") (mapcar #'gguf:tensor-info-type (gguf:tensor-infos f))))))
      (ignore-errors (delete-file in))
      (ignore-errors (delete-file out)))))

(test quantize-tool-names-the-tensor-of-any-failure
  "What goes wrong while quantize works on a tensor names the file and the
tensor, whatever signalled it; a GGUF file error keeps its own condition."
  (let* ((name "blk.0.ffn_up.weight")
         (e (handler-case (rontolisp::with-tensor-named ("/m.gguf" name)
                            (+ (make-array '(64 64) :element-type 'single-float) 1))
              (error (e) e))))
    (is (typep e 'rontolisp:tensor-data-error))
    (is (string= name (rontolisp:tensor-data-error-tensor e)))
    (is (string= "/m.gguf" (rontolisp:tensor-data-error-path e)))
    (is (contains (princ-to-string e) "#<(simple-array single-float (64 64))>") "~A" e)
    (is (<= (length (princ-to-string e)) rontolisp::*message-limit*)))
  (let ((name nil))
    (signals type-error (rontolisp::with-tensor-named ("/m.gguf" name) (+ 'a 1))))
  (signals gguf:gguf-error
    (rontolisp::with-tensor-named ("/m.gguf" "w") (gguf::gguf-error "/m.gguf" :x 1 "bad"))))

(test quantize-tool-and-inspect-100k-tensors-in-linear-time
  "A file of 100,000 tensors is made, inspected (text and JSON) and
quantized in seconds (about 1, 2 and 2.5 s of CPU when written).  Looking
each tensor up by name in a list made quantize quadratic (over 120 s); the
limit is generous so that only a return to the square fails."
  (let ((in (tmp-path "100k.gguf"))
        (out (tmp-path "100k.q8_0.gguf"))
        (data (make-array 32 :element-type 'single-float :initial-element 0.5))
        (limit (* 60 internal-time-units-per-second)))
    (flet ((timed (thunk)
             (let ((start (get-internal-real-time)))
               (funcall thunk)
               (- (get-internal-real-time) start))))
      (unwind-protect
           (progn
             (is (< (timed (lambda ()
                             (gguf:write in (gguf:make-file
                                             :tensors (loop for i below 100000
                                                            collect (list (format nil "blk.~D.weight" i)
                                                                          data))))))
                    limit))
             (dolist (args (list (list "inspect" in) (list "inspect" "--json" in)
                                 (list "quantize" in out "q8_0")))
               (let (code)
                 (is (< (timed (lambda () (setf code (run-exe args)))) limit) "~A too slow" args)
                 (is (eql 0 code) "~A exited ~S" args code)))
             (gguf:with-file (f out)
               (is (= 100000 (length (gguf:tensor-infos f))))
               (is (string= "F32" (gguf:tensor-info-type (gguf:tensor-info f "blk.99999.weight"))))))
        (ignore-errors (delete-file in))
        (ignore-errors (delete-file out))))))
