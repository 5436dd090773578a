;;;; test-convert.lisp - `rontolisp convert': preset shapes, tensor names and
;;;; keys, the type policy, the Laya directory round trip through our own
;;;; safetensors writer and reader.

(in-package "RONTOLISP-TESTS")

(def-suite convert :in all :description "The Laya -> GGUF converter.")
(in-suite convert)

(defun tensor-params (f)
  (reduce #'+ (mapcar (lambda (i) (reduce #'* (gguf:tensor-info-dims i))) (gguf:tensor-infos f))))

(defmacro with-converted ((f &rest args) &body body)
  (let ((out (gensym)))
    `(let ((,out (tmp-path "conv.gguf")))
       (unwind-protect
            (progn
              (is (= 0 (run-exe (list* "convert" "--random" "s1-pico" ,out (list ,@args)))))
              (gguf:with-file (,f ,out) ,@body))
         (ignore-errors (delete-file ,out))))))

(test convert-preset-parameter-counts
  "The presets' parameter counts are the seed's table."
  (loop for (name count) in '(("s1-pico" 202305) ("s1-nano" 1134209) ("s1-micro" 6630913))
        do (is (= count (reduce #'+ (mapcar (lambda (e) (reduce #'* (second e)))
                                            (apply #'rontolisp::laya-tensor-shapes
                                                   (rontolisp::preset name))))))))

(test convert-pico-default-types
  (with-converted (f)
    (is (= 202305 (tensor-params f)))
    (is (= 33 (length (gguf:tensor-infos f))))
    (is (string= "modern-bert" (gguf:value f "general.architecture")))
    (is (= 3 (gguf:value f "modern-bert.block_count")))
    (is (= 1 (gguf:value f "modern-bert.decision.block_count")))
    (is (= 64 (gguf:value f "modern-bert.embedding_length")))
    (is (string= "laya" (gguf:value f "modern-bert.decision.type")))
    (is-true (nth-value 2 (gguf:value f "modern-bert.decision.temperature.choice.3_5")))
    (is (string= "gpt2" (gguf:value f "tokenizer.ggml.model")))
    (is (= 1024 (length (gguf:value f "tokenizer.ggml.tokens"))))
    (is (equal '(2 3 4) (mapcar (lambda (k) (gguf:value f k))
                                '("tokenizer.ggml.bos_token_id" "tokenizer.ggml.seperator_token_id"
                                  "tokenizer.ggml.mask_token_id"))))
    (is (= 3 (gguf:value f "tokenizer.ggml.token_type_count")))
    (is (search "[MASK]" (gguf:value f "tokenizer.chat_template")))
    (dolist (info (gguf:tensor-infos f))
      (let ((name (gguf:tensor-info-name info))
            (type (gguf:tensor-info-type info)))
        (cond ((= 1 (length (gguf:tensor-info-dims info)))
               (is (string= "F32" type) "~A: 1-D should be F32" name))
              ((or (search "blk.2." name) (search "cls" name) (search "token_types" name))
               (is (string= "F32" type) "~A: head should be F32" name))
              (t (is (string= "F16" type) "~A: encoder matrix should be F16" name)))))))

(test convert-encoder-only-is-a-plain-modern-bert-encoder
  "--encoder-only: no decision-head tensor or key, block_count and
feed_forward_length of the encoder alone (one u32, as upstream writes it),
the keys llama.cpp's loader reads for the local layers and the FFN."
  (with-converted (f "--encoder-only")
    (is (= 14 (length (gguf:tensor-infos f))))
    (is (notany (lambda (i) (let ((n (gguf:tensor-info-name i)))
                              (or (search "cls" n) (search "token_types" n) (search "blk.2." n))))
                (gguf:tensor-infos f)))
    (is (notany (lambda (k) (search "decision" k)) (gguf:keys f)))
    (is (= 2 (gguf:value f "modern-bert.block_count")))
    (is (eql 128 (gguf:value f "modern-bert.feed_forward_length")))
    (is (= 10000.0 (gguf:value f "modern-bert.rope.freq_base_swa")))
    (is (= 160000.0 (gguf:value f "modern-bert.rope.freq_base")))
    (is (string= "gelu" (gguf:value f "modern-bert.hidden_activation")))
    (is (search "[MASK]" (gguf:value f "tokenizer.chat_template")))
    (is-false (nth-value 2 (gguf:value f "tokenizer.ggml.token_type_count")))))

(test convert-pico-q8-0-types
  (with-converted (f "--type" "q8_0" "--head-type" "bf16")
    (is (string= "F16" (gguf:tensor-info-type (gguf:tensor-info f "token_embd.weight"))))
    (is (string= "Q8_0" (gguf:tensor-info-type (gguf:tensor-info f "blk.0.attn_qkv.weight"))))
    (is (string= "Q8_0" (gguf:tensor-info-type (gguf:tensor-info f "blk.1.ffn_down.weight"))))
    (is (string= "BF16" (gguf:tensor-info-type (gguf:tensor-info f "blk.2.attn_qkv.weight"))))
    (is (string= "F32" (gguf:tensor-info-type (gguf:tensor-info f "blk.2.attn_qkv.bias"))))
    (is (= 7 (gguf:value f "general.file_type")))
    ;; the Q8_0 tensors read back as quantized matrices of the right shape
    (is (equal '(192 64) (array-dimensions (gguf:tensor f "blk.0.attn_qkv.weight"))))))

(test convert-type-policy
  (is (eq :f16 (rontolisp::tensor-type "blk.0.x.weight" '(48 48) nil :q8_0 :f32)))
  (is (eq :q8_0 (rontolisp::tensor-type "blk.0.x.weight" '(48 64) nil :q8_0 :f32)))
  (is (eq :f32 (rontolisp::tensor-type "blk.0.x.weight" '(64) nil :q8_0 :q8_0)))
  (is (eq :f16 (rontolisp::tensor-type "token_embd.weight" '(1024 64) nil :q8_0 :f32)))
  (is (eq :bf16 (rontolisp::tensor-type "cls.weight" '(64 64) t :f16 :bf16)))
  (is (string= "choice.3_5" (rontolisp::temperature-key "choice:3-5"))))

(test convert-laya-directory-round-trip
  "--write-laya writes a directory that converts to the same file as the
in-memory random model; the safetensors round trip is exact."
  (let ((dir (tmp-path "laya")) (a (tmp-path "a.gguf")) (b (tmp-path "b.gguf")))
    (unwind-protect
         (progn
           (is (= 0 (run-exe (list "convert" "--random" "s1-pico" a "--write-laya" dir))))
           (is (= 0 (run-exe (list "convert" "--random" "s1-pico" b))))
           (is (equalp (read-octets a 0 (with-open-file (s a :element-type '(unsigned-byte 8)) (file-length s)))
                       (read-octets b 0 (with-open-file (s b :element-type '(unsigned-byte 8)) (file-length s)))))
           (let ((tensors (rontolisp:read-safetensors (concatenate 'string dir "/model.safetensors")))
                 (orig (rontolisp::random-laya "s1-pico")))
             (is (= (length orig) (length tensors)))
             (is (every (lambda (x y) (and (string= (first x) (first y)) (equalp (second x) (second y))))
                        orig tensors)))
           (is (= 0 (run-exe (list "convert" dir b "--type" "q8_0"))))
           (gguf:with-file (f b)
             (is (string= "Q8_0" (gguf:tensor-info-type (gguf:tensor-info f "blk.1.attn_qkv.weight"))))))
      (ignore-errors (delete-file a))
      (ignore-errors (delete-file b)))))

(test convert-usage-and-missing-input
  (is (= 2 (run-exe (list "convert"))))
  (is (= 2 (run-exe (list "convert" "--random" "s1-huge" (tmp-path "x.gguf")))))
  (is (= 2 (run-exe (list "convert" "--random" "s1-pico" (tmp-path "x.gguf") "--type" "q4_k"))))
  (multiple-value-bind (code out err) (run-exe (list "convert" "/nonexistent-dir" (tmp-path "x.gguf")))
    (declare (ignore out))
    (is (= 1 code))
    (is (= 1 (count #\Newline err)))))

(test random-normal-fill-is-a-function-of-the-state
  "--random's weights come from prims/rng.c: the same state gives the same
values and the same next state; the values look like N(0, sigma)."
  (flet ((fill-from (state)
           (let ((a (make-array 20001 :element-type 'single-float)))
             (multiple-value-bind (next) (rontolisp::%random-normal-fill a 0.02d0 state)
               (values a next)))))
    (multiple-value-bind (a sa) (fill-from 42)
      (multiple-value-bind (b sb) (fill-from 42)
        (is (equalp a b))
        (is (= sa sb))
        (is (/= sa 42)))
      (is (not (equalp a (fill-from (1- (expt 2 64))))))
      (let* ((n (length a))
             (mean (/ (loop for x across a sum x) n))
             (sd (sqrt (/ (loop for x across a sum (expt (- x mean) 2)) n))))
        (is (< (abs mean) 0.001) "mean ~A" mean)
        (is (< 0.019 sd 0.021) "deviation ~A" sd)))))
