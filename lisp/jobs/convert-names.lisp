;;;; convert-names.lisp - what the converter calls each tensor: the tensors a
;;;; ModernBERT encoder and the Laya decision head hold in Hugging Face's
;;;; layout, their shapes for a config, and their GGUF names as upstream
;;;; llama.cpp's converter (conversion/bert.py) writes them.  The converter
;;;; itself is convert.lisp.

(in-package "COMMAND-LINE")

;;; The Hugging Face tensors: a ModernBERT encoder (under a prefix:
;;; "encoder.model." in a Laya directory, "model." or none in a Hugging
;;; Face one) and the Laya decision head.

(defun encoder-tensor-shapes (prefix &key hidden vocab layers intermediate &allow-other-keys)
  "The (hf-name shape init) of every tensor of a ModernBERT encoder of that
shape, its names under PREFIX; INIT is :normal, :one or :zero."
  (let ((h hidden) (out '()))
    (flet ((add (name shape init)
             (push (list (concatenate 'string prefix name) shape init) out)))
      (add "embeddings.tok_embeddings.weight" (list vocab h) :normal)
      (add "embeddings.norm.weight" (list h) :one)
      (dotimes (i layers)
        (flet ((n (s) (format nil "layers.~D.~A" i s)))
          (unless (zerop i) (add (n "attn_norm.weight") (list h) :one)) ; layer 0: Identity
          (add (n "attn.Wqkv.weight") (list (* 3 h) h) :normal)
          (add (n "attn.Wo.weight") (list h h) :normal)
          (add (n "mlp_norm.weight") (list h) :one)
          (add (n "mlp.Wi.weight") (list (* 2 intermediate) h) :normal)
          (add (n "mlp.Wo.weight") (list h intermediate) :normal)))
      (add "final_norm.weight" (list h) :one))
    (reverse out)))

(defparameter *random-head-logit-scale* 8d0
  "A random decision head's cls.output weights have the standard deviation
this over the square root of the hidden size (convert --random): the logits
of the built-in questions then have a standard deviation of 2 to 9 over the
presets (doc/decision.md).")

(defparameter *question-type-rows* 3
  "The rows of a Laya decision head's type embeddings: one per question type.")

(defun decision-head-tensor-shapes (&key hidden head-layers &allow-other-keys)
  "The (hf-name shape init) of every tensor of a Laya decision head.  INIT
for a random model is PyTorch-like: a matrix (:normal 1/sqrt(fan-in)), a
bias (:normal 0.02), the type embeddings (:normal 1) as nn.Embedding's,
norms :one and :zero, and the scorer's output weights
*RANDOM-HEAD-LOGIT-SCALE* / sqrt(hidden)."
  (let ((h hidden) (out '())
        (w (/ 1d0 (sqrt hidden))) (w4 (/ 1d0 (sqrt (* 4 hidden)))) (b '(:normal 0.02d0)))
    (flet ((add (name shape init) (push (list name shape init) out)))
      (dotimes (i head-layers)
        (flet ((n (s) (format nil "head.layers.~D.~A" i s)))
          (add (n "self_attn.in_proj_weight") (list (* 3 h) h) (list :normal w))
          (add (n "self_attn.in_proj_bias") (list (* 3 h)) b)
          (add (n "self_attn.out_proj.weight") (list h h) (list :normal w))
          (add (n "self_attn.out_proj.bias") (list h) b)
          (add (n "linear1.weight") (list (* 4 h) h) (list :normal w))
          (add (n "linear1.bias") (list (* 4 h)) b)
          (add (n "linear2.weight") (list h (* 4 h)) (list :normal w4))
          (add (n "linear2.bias") (list h) b)
          (add (n "norm1.weight") (list h) :one)
          (add (n "norm1.bias") (list h) :zero)
          (add (n "norm2.weight") (list h) :one)
          (add (n "norm2.bias") (list h) :zero)))
      (add "head.type_embeddings.weight" (list *question-type-rows* h) '(:normal 1d0))
      (add "head.dense.weight" (list h h) (list :normal w))
      (add "head.dense.bias" (list h) b)
      (add "head.norm.weight" (list h) :one)
      (add "head.norm.bias" (list h) :zero)
      (add "head.out.weight" (list 1 h) (list :normal (* w *random-head-logit-scale*)))
      (add "head.out.bias" (list 1) b))
    (reverse out)))

(defun laya-tensor-shapes (&rest shape &key &allow-other-keys)
  "The (hf-name shape init) of every tensor of a Laya model of SHAPE (the
plist of a preset): the encoder, then the decision head."
  (append (apply #'encoder-tensor-shapes "encoder.model." shape)
          (apply #'decision-head-tensor-shapes shape)))

(defparameter *head-renames*
  '(("self_attn.in_proj_weight" . "attn_qkv.weight") ("self_attn.in_proj_bias" . "attn_qkv.bias")
    ("self_attn.out_proj.weight" . "attn_output.weight") ("self_attn.out_proj.bias" . "attn_output.bias")
    ("linear1.weight" . "ffn_up.weight") ("linear1.bias" . "ffn_up.bias")
    ("linear2.weight" . "ffn_down.weight") ("linear2.bias" . "ffn_down.bias")
    ("norm1.weight" . "attn_norm.weight") ("norm1.bias" . "attn_norm.bias")
    ("norm2.weight" . "ffn_norm.weight") ("norm2.bias" . "ffn_norm.bias"))
  "Decision-head layer tensors (PyTorch nn.TransformerEncoderLayer) and their
GGUF block names.")

(defparameter *encoder-fixed-renames*
  '(("embeddings.tok_embeddings.weight" . "token_embd.weight")
    ("embeddings.norm.weight" . "token_embd_norm.weight")
    ("final_norm.weight" . "output_norm.weight"))
  "Encoder tensors outside the blocks (under the encoder's prefix) and their
GGUF names.")

(defparameter *decision-fixed-renames*
  '(("head.type_embeddings.weight" . "token_types.weight")
    ("head.dense.weight" . "cls.weight") ("head.dense.bias" . "cls.bias")
    ("head.norm.weight" . "cls.norm.weight") ("head.norm.bias" . "cls.norm.bias")
    ("head.out.weight" . "cls.output.weight") ("head.out.bias" . "cls.output.bias"))
  "Decision-head tensors outside its layers and their GGUF names.")

(defparameter *encoder-renames*
  '(("attn_norm.weight" . "attn_norm.weight") ("attn.Wqkv.weight" . "attn_qkv.weight")
    ("attn.Wo.weight" . "attn_output.weight") ("mlp_norm.weight" . "ffn_norm.weight")
    ("mlp.Wi.weight" . "ffn_up.weight") ("mlp.Wo.weight" . "ffn_down.weight"))
  "Encoder layer tensors (ModernBERT) and their GGUF block names, as
llama.cpp's tensor mapping for MODEL_ARCH.MODERN_BERT.")

(defparameter *hf-head-renames*
  '(("head.dense.weight" . "cls.weight") ("head.norm.weight" . "cls.norm.weight")
    ("classifier.weight" . "cls.output.weight") ("classifier.bias" . "cls.output.bias"))
  "The tensors of Hugging Face's ModernBERT heads (MaskedLM, sequence
classification) that upstream's tensor map names and llama.cpp's loader
reads (its rank pooling: dense, GELU, norm, classifier).")

(defparameter *hf-dropped-tensors*
  '(("decoder.weight" . "the masked-LM decoder (tied to the token embeddings)")
    ("decoder.bias" . "the masked-LM decoder's bias")
    ("head.dense.bias" . "the head's dense bias")
    ("head.norm.bias" . "the head's norm bias"))
  "Tensors of Hugging Face's ModernBERT heads that llama.cpp's modern-bert
loader has no place for (it refuses a file holding them): left out, each
with a message.")

(defun layer-index (name prefix)
  "For NAME = PREFIX N.REST answer N (or the string between PREFIX and the
next dot when it is not a plain decimal number, such as \"-1\" or \" 1\")
and REST; NIL when NAME does not start with PREFIX."
  (when (and (> (length name) (length prefix)) (string= prefix name :end2 (length prefix)))
    (let* ((start (length prefix))
           (dot (position #\. name :start start))
           (part (subseq name start dot)))
      (values (if (and (plusp (length part)) (every #'digit-char-p part)
                       (or (= 1 (length part)) (char/= #\0 (char part 0))))
                  (parse-integer part)
                  part)
              (if dot (subseq name (1+ dot)) "")))))

(defun gguf-tensor-name (hf-name layers &key (prefix "encoder.model.") (head :decision))
  "The GGUF name of the Hugging Face tensor HF-NAME of an encoder of LAYERS
layers whose names start with PREFIX, and whether it belongs to a head (the
Laya decision head when HEAD is :decision, Hugging Face's when :hf); NIL
for a name the converter does not know."
  (flet ((rel (table name) (cdr (assoc name table :test #'string=))))
    (let ((encoder-name (and (>= (length hf-name) (length prefix))
                             (string= prefix hf-name :end2 (length prefix))
                             (subseq hf-name (length prefix)))))
      (when encoder-name
        (let ((fixed (rel *encoder-fixed-renames* encoder-name)))
          (when fixed (return-from gguf-tensor-name (values fixed nil))))
        (multiple-value-bind (n rest) (layer-index encoder-name "layers.")
          (when (integerp n)
            (let ((g (rel *encoder-renames* rest)))
              (return-from gguf-tensor-name (and g (values (format nil "blk.~D.~A" n g) nil))))))))
    (ecase head
      (:decision
       (let ((fixed (rel *decision-fixed-renames* hf-name)))
         (when fixed (return-from gguf-tensor-name (values fixed t))))
       (multiple-value-bind (n rest) (layer-index hf-name "head.layers.")
         (when (integerp n)
           (let ((g (rel *head-renames* rest)))
             (return-from gguf-tensor-name
               (and g (values (format nil "blk.~D.~A" (+ layers n) g) t)))))))
      (:hf (let ((g (rel *hf-head-renames* hf-name)))
             (when g (return-from gguf-tensor-name (values g t))))))
    nil))
