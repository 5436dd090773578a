;;;; quantize-mixtures.lisp - which type each tensor gets when `rontolisp
;;;; quantize' makes a file of one of llama-quantize's file types (ftypes):
;;;; the ftype table, and llama.cpp's per-tensor rules (src/llama-quant.cpp's
;;;; llama_tensor_get_type and tensor_type_fallback) ported for every ftype
;;;; that needs no importance matrix.  The rules in words are in
;;;; doc/command-line.md §3.

(in-package "COMMAND-LINE")

;;; Types.  Ids, names and blocks are C's type table's (lisp/quant/formats.lisp);
;;; the rules below name types as llama.cpp's code does, by ggml name.

(defun quantize-write-types ()
  "The ggml type ids quantize writes: every type C's table has a row for
(F32, F16, BF16, Q8_0, the legacy quants, the K-quants and IQ4), in that
order."
  (mapcar #'ggml-type-id (computed-types)))

(defun type-block-size (id)
  "Values per block of the ggml type ID (1 for F32, F16 and BF16)."
  (ggml-type-block-size (find-ggml-type id)))

;;; File types.

(defparameter *quantize-ftypes*
  '(("F32" 0 "F32") ("F16" 1 "F16") ("BF16" 32 "BF16") ("Q8_0" 7 "Q8_0")
    ("Q4_0" 2 "Q4_0") ("Q4_1" 3 "Q4_1") ("Q5_0" 8 "Q5_0") ("Q5_1" 9 "Q5_1")
    ("Q2_K" 10 "Q2_K") ("Q3_K_S" 11 "Q3_K") ("Q3_K_M" 12 "Q3_K") ("Q3_K_L" 13 "Q3_K")
    ("Q4_K_S" 14 "Q4_K") ("Q4_K_M" 15 "Q4_K") ("Q5_K_S" 16 "Q5_K") ("Q5_K_M" 17 "Q5_K")
    ("Q6_K" 18 "Q6_K") ("IQ4_NL" 25 "IQ4_NL") ("IQ4_XS" 30 "IQ4_XS")
    ;; llama-quantize's aliases
    ("Q3_K" 12 "Q3_K") ("Q4_K" 15 "Q4_K") ("Q5_K" 17 "Q5_K"))
  "The file types quantize makes: llama-quantize's name, llama.cpp's ftype
number (general.file_type) and the ggml name of its main type.")

(defparameter *quantize-refused-ftypes*
  '(("IQ2_XXS" 19 t) ("IQ2_XS" 20 t) ("IQ2_S" 28 t) ("IQ2_M" 29 t) ("IQ1_S" 24 t)
    ("IQ1_M" 31 t) ("Q2_K_S" 21 t) ("IQ3_XXS" 23 t) ("IQ3_XS" 22 nil) ("IQ3_S" 26 nil)
    ("IQ3_M" 27 nil) ("TQ1_0" 36 nil) ("TQ2_0" 37 nil) ("MXFP4_MOE" 38 nil)
    ("Q1_0" 40 nil) ("Q2_0" 41 nil) ("COPY" nil nil))
  "llama-quantize's other file types: name, ftype number, and whether
llama-quantize itself needs an importance matrix for them.")

(defparameter *quantize-ftype-uses*
  '(("F32" "no loss: a reference, or the input to quantize from")
    ("F16" "no loss for weights trained in 16 bits, half of F32's size")
    ("BF16" "F32's range in 16 bits: for checkpoints trained in bf16")
    ("Q8_0" "nearly lossless, the safe choice (llama.cpp: +0.0026 ppl @ Llama-3-8B)")
    ("Q4_0" "legacy 4-bit: prefer Q4_K_S or Q4_K_M (+0.4685 ppl)")
    ("Q4_1" "legacy 4-bit with offsets: prefer Q4_K_M (+0.4511 ppl)")
    ("Q5_0" "legacy 5-bit: prefer Q5_K_S (+0.1316 ppl)")
    ("Q5_1" "legacy 5-bit with offsets: prefer Q5_K_M (+0.1062 ppl)")
    ("Q2_K" "the smallest without an importance matrix, at a large loss (+3.5199 ppl)")
    ("Q3_K_S" "3-bit throughout: only when memory is very tight (+1.6321 ppl)")
    ("Q3_K_M" "3-bit, attention values and feed-forward down at 4-5 bits (+0.6569 ppl)")
    ("Q3_K_L" "3-bit, those at 5 bits: larger than Q3_K_M, better (+0.5562 ppl)")
    ("Q4_K_S" "4-bit, a few tensors at 5 bits (+0.2689 ppl)")
    ("Q4_K_M" "the usual balance of size and quality: some tensors at 6 bits (+0.1754 ppl)")
    ("Q5_K_S" "5-bit: close to the original (+0.1049 ppl)")
    ("Q5_K_M" "5-bit, some tensors at 6 bits: very close (+0.0569 ppl)")
    ("Q6_K" "nearly Q8_0's quality at 3/4 of its size (+0.0217 ppl)")
    ("IQ4_NL" "non-linear 4-bit in blocks of 32, for rows that do not split into 256s")
    ("IQ4_XS" "non-linear 4-bit: about Q4_K_S's quality in less space"))
  "When to use each file type quantize makes, one line each for `quantize
--help' (the perplexity figures are llama-quantize's own table, measured
by llama.cpp on Llama-3-8B).")

(defun quantize-types-help ()
  "The table of file types of `rontolisp quantize --help': per type its
ftype number, name, the bits per weight of its main type and when to use
it; then the aliases and the types refused, with the reason."
  (with-output-to-string (s)
    (format s "Types (ftype number or name, bits per weight of the main type, when to use it;~%~
the K-quant mixtures _S _M _L give some tensors more bits, --dry-run prints a file's own):~%")
    (loop for (name ftype type) in *quantize-ftypes*
          for use = (second (assoc name *quantize-ftype-uses* :test #'string=))
          when use
            do (format s "  ~2D  ~7A ~5,2F bpw  ~A~%" ftype name (ggml-type-bits type) use))
    (format s "Aliases: ~{~A~^, ~}.~%"
            (loop for (name ftype) in *quantize-ftypes*
                  unless (assoc name *quantize-ftype-uses* :test #'string=)
                    collect (format nil "~A = ~A" name (ftype-name ftype))))
    (format s "Refused, needing an importance matrix, which quantize does not take:~%  ~{~A~^ ~}~%~
Refused, not written: ~{~A~^ ~}~%"
            (loop for (name nil imatrix) in *quantize-refused-ftypes* when imatrix collect name)
            (loop for (name nil imatrix) in *quantize-refused-ftypes* unless imatrix collect name))))

(defun ftype-name (ftype)
  "llama-quantize's name of the ftype number FTYPE."
  (first (find ftype *quantize-ftypes* :key #'second)))

(defun find-ftype (string)
  "The entry (name ftype main-type-name) of *QUANTIZE-FTYPES* named by STRING,
a name in any case or an ftype number; a USAGE-ERROR names any other."
  (let* ((number (and (plusp (length string))
                      (every (lambda (c) (or (digit-char-p c) (char= c #\-))) string)
                      (ignore-errors (parse-integer string))))
         (match (lambda (table)
                  (or (find string table :key #'first :test #'string-equal)
                      (and number (find number table :key #'second))))))
    (or (funcall match *quantize-ftypes*)
        (let ((refused (funcall match *quantize-refused-ftypes*)))
          (cond ((and refused (third refused))
                 (usage-error "~A: this file type needs an importance matrix (llama-quantize ~
refuses it without --imatrix: so few bits are only usable with each column's error weighed by its ~
activations), which rontolisp quantize does not take; quantize --help lists the types it makes"
                              (first refused)))
                (refused
                 (usage-error "~A: expected one of ~{~A~^ ~} (or their ftype numbers), found a ~
file type rontolisp quantize does not write" (first refused) (mapcar #'first *quantize-ftypes*)))
                (t (usage-error "expected a file type ~{~A~^ ~} (any case) or its ftype number, ~
found ~S" (mapcar #'first *quantize-ftypes*) string)))))))

;;; The model's figures the rules look at.

(defstruct (mixture (:constructor %make-mixture) (:copier nil) (:predicate nil))
  "What llama.cpp's quantize_state_impl holds for one file: the ftype, the
architecture and hyperparameters the rules read, and the running counts
of the attention-value and feed-forward tensors seen so far."
  (ftype 0) (arch "") (n-layer 0) (n-gqa 0) (n-expert 0) (size-70b nil)
  (tied t) (n-attention-wv 0) (i-attention-wv 0) (i-ffn-down 0) (i-ffn-gate 0) (i-ffn-up 0))

(defun tensor-category (name)
  "llama.cpp's broad category of the tensor NAME: :output, :token-embd,
:attn-qkv, :attn-kv-b, :attn-v, :attn-k, :attn-q, :attn-output, :ffn-up,
:ffn-gate, :ffn-down or :other (the first of these tests that holds)."
  (cond ((string= name "output.weight") :output)
        ((member name '("token_embd.weight" "per_layer_token_embd.weight") :test #'string=)
         :token-embd)
        ((search "attn_qkv.weight" name) :attn-qkv)
        ((search "attn_kv_b.weight" name) :attn-kv-b)
        ((search "attn_v.weight" name) :attn-v)
        ((search "attn_k.weight" name) :attn-k)
        ((search "attn_q.weight" name) :attn-q)
        ((search "attn_output.weight" name) :attn-output)
        ((search "ffn_up" name) :ffn-up)
        ((search "ffn_gate" name) :ffn-gate)
        ((search "ffn_down" name) :ffn-down)
        (t :other)))

(defun attn-v-like-p (category)
  (member category '(:attn-v :attn-qkv :attn-kv-b)))

(defun metadata-number (metadata key &optional default)
  "The number at KEY of METADATA ((key type value) ...), the first element
of an array, or DEFAULT."
  (let ((v (third (find key metadata :key #'first :test #'string=))))
    (cond ((realp v) v)
          ((and (vectorp v) (plusp (length v)) (realp (aref v 0))) (aref v 0))
          (t default))))

(defun make-mixture (ftype metadata names)
  "The MIXTURE of a file of METADATA (after --override-kv) and tensor NAMES
quantized to FTYPE: the architecture, block_count (else one more than the
largest blk.N), heads per key-value head, experts, whether llama.cpp takes
it for a 70B model, whether the token embeddings stand for the output (no
output.weight), and how many attention-value tensors there are."
  (let* ((arch (let ((a (third (find "general.architecture" metadata :key #'first
                                                                     :test #'string=))))
                 (if (stringp a) a "")))
         (key (lambda (suffix) (format nil "~A.~A" arch suffix)))
         (n-layer (or (metadata-number metadata (funcall key "block_count"))
                      (1+ (reduce #'max names :key #'tensor-layer :initial-value -1))))
         (n-head (metadata-number metadata (funcall key "attention.head_count") 0))
         (n-head-kv (metadata-number metadata (funcall key "attention.head_count_kv") n-head))
         (n-expert (let ((e (metadata-number metadata (funcall key "expert_count") 0)))
                     (if (<= e 1) 0 e))))
    (%make-mixture
     :ftype ftype :arch arch :n-layer n-layer
     :n-gqa (if (zerop n-head-kv) 0 (floor n-head n-head-kv))
     :n-expert n-expert
     ;; llama.cpp's LLM_TYPE_70B, the model sizes it sets it for
     :size-70b (or (and (string= arch "llama") (= n-layer 80) (/= n-expert 8)
                        (/= n-head n-head-kv))
                   (and (member arch '("deci" "olmo" "qwen2") :test #'string=) (= n-layer 80))
                   (and (string= arch "jais2") (= n-layer 68)))
     :tied (not (member "output.weight" names :test #'string=))
     :n-attention-wv (count-if (lambda (n) (attn-v-like-p (tensor-category n))) names))))

(defun use-more-bits-p (i n)
  "llama.cpp's use_more_bits: the first and last eighth of N layers, and
every third between them."
  (or (< i (floor n 8)) (>= i (floor (* 7 n) 8)) (= 2 (mod (- i (floor n 8)) 3))))

(defun mixture-layer (m counter name)
  "The (layer count) a feed-forward rule reads: the running COUNTER and
the layer count, or with experts the N of the name's `blk.N.'."
  (if (> (mixture-n-expert m) 1)
      (let ((layer (tensor-layer name)))
        (unless (< -1 layer (mixture-n-layer m))
          (rontolisp-error 'quantize "~A: expected a name blk.N. with N from 0 to ~D (an expert ~
model's layer), found ~:[none~;~:*~D~]" name (1- (mixture-n-layer m)) (and (>= layer 0) layer)))
        (values layer (mixture-n-layer m)))
      (values counter (mixture-n-layer m))))

(defun mixture-type (m type name ne &key output-type token-embedding-type)
  "The type llama.cpp's llama_tensor_get_type_impl gives the tensor NAME
of dims NE, TYPE the file's main type, under the mixture M (whose counts
it advances), for the ftypes of *QUANTIZE-FTYPES*."
  (let* ((ftype (mixture-ftype m))
         (category (tensor-category name))
         (falcon (string= (mixture-arch m) "falcon"))
         (gqa (mixture-n-gqa m))
         (experts (mixture-n-expert m))
         (new type))
    (flet ((ft (&rest names) (member (ftype-name ftype) names :test #'string=)))
      (cond
        ((or (eq category :output) (and (mixture-tied m) (eq category :token-embd)))
         (cond (output-type (setf new output-type))
               ((or falcon (plusp (mod (first ne) (type-block-size new))))
                (setf new (ggml-id "Q8_0")))
               ((/= new (ggml-id "Q8_0")) (setf new (ggml-id "Q6_K")))))
        ((eq category :token-embd)
         (when token-embedding-type (setf new token-embedding-type)))
        ((attn-v-like-p category)
         (let ((i (mixture-i-attention-wv m)))
           (cond ((ft "Q2_K") (setf new (if (>= gqa 4) (ggml-id "Q4_K") (ggml-id "Q3_K"))))
                 ((ft "Q3_K_M") (setf new (if (< i 2) (ggml-id "Q5_K") (ggml-id "Q4_K"))))
                 ((ft "Q3_K_L") (setf new (ggml-id "Q5_K")))
                 ((and (ft "IQ4_NL" "IQ4_XS") (>= gqa 4)) (setf new (ggml-id "Q5_K")))
                 ((and (ft "Q4_K_M" "Q5_K_M") (use-more-bits-p i (mixture-n-attention-wv m)))
                  (setf new (ggml-id "Q6_K")))
                 ((and (ft "Q4_K_S") (< i 4)) (setf new (ggml-id "Q5_K"))))
           (when (and (mixture-size-70b m) (member new (list (ggml-id "Q3_K") (ggml-id "Q4_K"))))
             (setf new (ggml-id "Q5_K")))
           (when (= experts 8) (setf new (ggml-id "Q8_0")))
           (incf (mixture-i-attention-wv m))))
        ((eq category :attn-k)
         (when (= experts 8) (setf new (ggml-id "Q8_0"))))
        ((eq category :ffn-down)
         (multiple-value-bind (i n) (mixture-layer m (mixture-i-ffn-down m) name)
           (cond ((ft "Q2_K") (setf new (ggml-id "Q3_K")))
                 ((ft "Q3_K_M")
                  (setf new (cond ((< i (floor n 16)) (ggml-id "Q5_K"))
                                  ((or (not falcon) (use-more-bits-p i n)) (ggml-id "Q4_K"))
                                  (t (ggml-id "Q3_K")))))
                 ((ft "Q3_K_L") (setf new (if falcon (ggml-id "Q4_K") (ggml-id "Q5_K"))))
                 ((ft "Q4_K_M")
                  (if falcon
                      (setf new (cond ((< i (floor n 16)) (ggml-id "Q6_K"))
                                      ((use-more-bits-p i n) (ggml-id "Q5_K"))
                                      (t (ggml-id "Q4_K"))))
                      (when (use-more-bits-p i n) (setf new (ggml-id "Q6_K")))))
                 ((and (< i (floor n 8)) (ft "IQ4_NL" "IQ4_XS")) (setf new (ggml-id "Q5_K")))
                 ((and (ft "Q5_K_M") (use-more-bits-p i n)) (setf new (ggml-id "Q6_K")))
                 ((and (ft "Q4_K_S") (not falcon) (< i (floor n 8))) (setf new (ggml-id "Q5_K")))))
         (incf (mixture-i-ffn-down m)))
        ((eq category :attn-output)
         (cond (falcon (when (ft "Q3_K_L") (setf new (ggml-id "Q4_K"))))
               ((= experts 8)
                (when (ft "Q2_K" "Q3_K_S" "Q3_K_M" "IQ4_NL" "Q4_K_S" "Q4_K_M" "IQ4_XS")
                  (setf new (ggml-id "Q5_K"))))
               ((ft "Q2_K") (setf new (ggml-id "Q3_K")))
               ((ft "Q3_K_M") (setf new (ggml-id "Q4_K")))
               ((ft "Q3_K_L") (setf new (ggml-id "Q5_K")))))
        ((eq category :ffn-gate)
         (mixture-layer m (mixture-i-ffn-gate m) name)
         (incf (mixture-i-ffn-gate m)))
        ((eq category :ffn-up)
         (mixture-layer m (mixture-i-ffn-up m) name)
         (incf (mixture-i-ffn-up m))))
      new)))

(defun type-fallback (type cols)
  "llama.cpp's tensor_type_fallback: TYPE when its block divides COLS (a
row's values), else the smaller-block type it falls back to (IQ4_XS to
IQ4_NL, Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0),
and F16 when that does not fit either.  Answers the type and whether it
fell back."
  (if (zerop (mod cols (type-block-size type)))
      (values type nil)
      (let ((next (cond ((= type (ggml-id "IQ4_XS")) (ggml-id "IQ4_NL"))
                        ((member type (list (ggml-id "Q2_K") (ggml-id "Q3_K"))) (ggml-id "Q4_0"))
                        ((= type (ggml-id "Q4_K")) (ggml-id "Q5_0"))
                        ((= type (ggml-id "Q5_K")) (ggml-id "Q5_1"))
                        ((= type (ggml-id "Q6_K")) (ggml-id "Q8_0"))
                        (t type))))
        (values (if (zerop (mod cols (type-block-size next))) next (ggml-id "F16")) t))))
