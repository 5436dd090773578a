;;;; selection.lisp - which tensors of a model llama-quantize quantizes:
;;;; the rule `quantize' plans with and calibration checks against.

(in-package "RONTOLISP")

(defparameter *quantize-name-exclusions*
  '("_norm.weight" "ffn_gate_inp.weight" "ffn_gate_tid2eid.weight" "altup" "laurel"
    "per_layer_model_proj" "ssm_conv1d" "shortconv.conv.weight"
    "indexer.k_proj.weight" "indexer.q_proj.weight"
    "time_mix_first.weight" "time_mix_w0.weight" "time_mix_w1.weight" "time_mix_w2.weight"
    "time_mix_v0.weight" "time_mix_v1.weight" "time_mix_v2.weight"
    "time_mix_a0.weight" "time_mix_a1.weight" "time_mix_a2.weight"
    "time_mix_g1.weight" "time_mix_g2.weight"
    "time_mix_decay_w1.weight" "time_mix_decay_w2.weight" "time_mix_lerp_fused.weight"
    "attn_rel_b.weight" ".position_embd" "sam.pos_embd" "sam.neck." "sam.net_" ".rel_pos"
    ".patch_embd" ".patch_merger" "a.rvq.codebook" "mm.a.code_embd")
  "Substrings that keep a tensor out of quantization, as in llama.cpp's
src/llama-quant.cpp (norms, MoE gates, small recurrent and relative-position
weights, multimodal position and patch embeddings, audio codebooks).")

(defparameter *quantize-exact-exclusions* '("position_embd.weight" "token_types.weight")
  "Whole names llama-quantize never quantizes: BERT's position embeddings
and token types.")

(defun ggml-n-dims (ne)
  "ggml's n_dims of the ggml dims NE: trailing dimensions of 1 do not
count, and there is always at least one."
  (let ((last (position-if (lambda (d) (/= d 1)) ne :from-end t)))
    (if last (1+ last) 1)))

(defun trim-dims (ne)
  "The ggml dims NE without the trailing 1s ggml's n_dims leaves out."
  (subseq ne 0 (ggml-n-dims ne)))

(defun ends-with (string suffix)
  "True when STRING ends with SUFFIX."
  (let ((n (length string)) (m (length suffix)))
    (and (>= n m) (string= string suffix :start1 (- n m)))))

(defun quantizable-tensor-p (name ne &key leave-output)
  "True when llama-quantize quantizes the tensor NAME of ggml dims NE: at
least two dimensions besides trailing 1s, a name ending in `weight', none
of the excluded names, and not output.weight with LEAVE-OUTPUT
(--leave-output-tensor)."
  (and (>= (ggml-n-dims ne) 2)
       (ends-with name "weight")
       (notany (lambda (s) (search s name)) *quantize-name-exclusions*)
       (not (member name *quantize-exact-exclusions* :test #'string=))
       (not (and leave-output (string= name "output.weight")))))
