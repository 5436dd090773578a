;;;; packages.lisp - every package of rontolisp, in one place.
;;;;
;;;; rontolisp is ECL with native primitives for quantized language models:
;;;; ggml's Q8_0 format, a quantized matrix that answers CL's array functions,
;;;; a deterministic matrix-vector product and the GGUF container.  The public
;;;; API lives in four packages that user code reaches by prefix
;;;; (`rontolisp:quantize', `vec:matvec', `gguf:read'); none of them is meant
;;;; to be :USEd.  Primitives implemented in C are internal and start with %.
;;;; The REPL and scripts start in RONTOLISP-USER, which uses only CL.

(defpackage "RONTOLISP"
  (:use "CL")
  (:shadow "EXIT")
  (:documentation "The rontolisp runtime: quantization, the quantized matrix,
the command line, and the root of every error the project signals.")
  (:export
   ;; runtime
   "*ARGS*" "EXIT" "VERSION" "SIMD" "THREADS" "SIMD-PATH" "MAIN"
   ;; number formats
   "F16-BITS" "F16-VALUE" "BF16-BITS" "BF16-VALUE"
   ;; conditions
   "RONTOLISP-ERROR" "RONTOLISP-ERROR-MESSAGE"
   "USAGE-ERROR" "SHAPE-ERROR" "SHAPE-ERROR-EXPECTED" "SHAPE-ERROR-FOUND"
   "ELEMENT-TYPE-ERROR" "ELEMENT-TYPE-ERROR-FOUND"
   "UNKNOWN-FORMAT-ERROR" "UNKNOWN-FORMAT-ERROR-FORMAT"
   "QUANTIZE-ERROR" "NON-FINITE-ERROR" "NON-FINITE-ERROR-INDEX"
   "SCALE-OVERFLOW-ERROR" "SCALE-OVERFLOW-ERROR-ROW" "SCALE-OVERFLOW-ERROR-BLOCK"
   "INDEX-ERROR" "IMMUTABLE-ERROR" "QUANTIZED-MATRIX-ERROR"
   "OUT-OF-RANGE-ERROR" "OUT-OF-RANGE-ERROR-VALUE"
   ;; packed half-precision arrays
   "FLOAT16-ARRAY" "BFLOAT16-ARRAY" "FLOAT16-ARRAY-P" "BFLOAT16-ARRAY-P"
   "MAKE-FLOAT16-ARRAY" "MAKE-BFLOAT16-ARRAY" "HALF-ARRAY-BITS"
   "HALF-ARRAY-DIMENSIONS" "HALF-ARRAY-TO-SINGLE"
   ;; the quantized matrix
   "QUANTIZE" "DEQUANTIZE" "QUANTIZED-MATRIX" "QUANTIZED-MATRIX-P" "Q8-0"
   "QUANTIZED-MATRIX-OCTETS" "QUANTIZED-MATRIX-TYPE"
   "Q4-0" "Q4-1" "Q5-0" "Q5-1" "Q2-K" "Q3-K" "Q4-K" "Q5-K" "Q6-K" "IQ4-NL" "IQ4-XS"
   ;; outlier-aware Q8_0 (outliers.lisp)
   "OUTLIER-COLUMNS"
   ;; conversion tools (quantize-tool.lisp, safetensors.lisp, convert.lisp)
   "QUANTIZE-FILE" "TENSOR-DATA-ERROR" "TENSOR-DATA-ERROR-PATH" "TENSOR-DATA-ERROR-TENSOR"
   "READ-JSON-FILE" "PARSE-JSON" "JSON-ERROR" "JSON-ERROR-PATH" "JSON-ERROR-OFFSET"
   "READ-SAFETENSORS" "WRITE-SAFETENSORS" "SAFETENSORS-ERROR" "SAFETENSORS-ERROR-PATH"
   "SAFETENSORS-ERROR-OFFSET" "SAFETENSORS-ERROR-REASON"
   "CONVERT-LAYA" "CONVERT-HF" "CONVERT-RANDOM" "WRITE-RANDOM-LAYA" "WRITE-RANDOM-HF"
   "CONVERT-ERROR" "CONVERT-ERROR-PATH"
   ;; files.lisp
   "FILE-IO-ERROR" "FILE-IO-ERROR-PATH" "NATIVE-NAMESTRING" "USER-NAMESTRING"
   ;; threads.lisp
   "THREAD-LIMIT-ERROR" "THREAD-LIMIT-ERROR-LIMIT" "*THREAD-LIMIT*"
   ;; template.lisp
   "COMPILE-TEMPLATE" "RENDER-TEMPLATE" "COMPILED-TEMPLATE" "COMPILED-TEMPLATE-P"
   "TEMPLATE-ERROR" "TEMPLATE-ERROR-OFFSET" "*TEMPLATE-NESTING-LIMIT*"))

(defpackage "VEC"
  (:use "CL")
  (:export
   ;; matrix times vector: a quantized matrix or the f32 baseline
   "MATVEC" "MATVEC-INTO"
   ;; the encoder's steps (encoder.lisp): matrix times a sequence, then
   ;; LayerNorm, rotary embedding, attention and GeGLU on n x d arrays
   "MATMUL" "MATMUL-INTO" "LAYER-NORM" "ROPE-NEOX" "ATTENTION" "GEGLU"
   ;; packed float vectors only
   "DOT" "NORM")
  (:documentation "Vector operations on packed float arrays, the
matrix-vector product of a quantized matrix, and the encoder's kernels
(matrix times a token sequence, LayerNorm, RoPE, attention, GeGLU)."))

(defpackage "LINALG"
  (:use "CL")
  (:export
   "ROW"                                ; also of a quantized matrix
   "TRANSPOSE")                         ; packed float arrays only
  (:documentation "Linear algebra on packed float arrays; LINALG:ROW reads a
row of a quantized matrix."))

(defpackage "GGUF"
  (:use "CL")
  (:shadow "READ" "WRITE" "CLOSE")
  (:export
   ;; reading
   "READ" "CLOSE" "WITH-FILE" "GGUF-FILE" "GGUF-FILE-P"
   "PATH" "VERSION" "ALIGNMENT" "FILE-SIZE" "DATA-OFFSET"
   "METADATA" "KEYS" "VALUE" "VALUE-TYPE" "TENSOR-NAMES" "TENSOR-INFO" "TENSOR" "TENSOR-OCTETS"
   "TENSOR-INFO-NAME" "TENSOR-INFO-SHAPE" "TENSOR-INFO-DIMS" "TENSOR-INFO-TYPE"
   "TENSOR-INFO-TYPE-ID" "TENSOR-INFO-OFFSET" "TENSOR-INFO-BYTES"
   "TENSOR-INFOS" "TYPE-NAME"
   ;; writing
   "MAKE-FILE" "WRITE" "STREAM-PUT-TENSOR"
   ;; conditions
   "GGUF-ERROR" "GGUF-ERROR-PATH" "GGUF-ERROR-OFFSET" "GGUF-ERROR-REASON"
   "FILE-CLOSED-ERROR"
   ;; shard sets
   "SHARD-PATH" "SPLIT-PLAN" "WRITE-SHARDS" "WRITE-STAGED" "MERGE-SHARDS"
   "SHARD-TENSORS" "SPLIT-METADATA" "WITHOUT-SPLIT-KEYS"
   "SHARD-ERROR" "MISSING-SHARD-ERROR" "FOREIGN-SHARD-ERROR" "SHARD-COUNT-ERROR")
  (:documentation "Reading, inspecting and writing GGUF files, llama.cpp's
model container."))

(defpackage "MODEL"
  (:use "CL")
  (:shadow "LOAD")
  (:export
   "LOAD" "ENCODE" "CALIBRATE" "ENCODER" "ENCODER-P" "HYPERPARAMETERS"
   "MODEL-ERROR" "MODEL-ERROR-PATH"
   ;; decision.lisp
   "RENDER" "DECIDE" "QUESTION-ERROR" "*QUESTIONS*"
   ;; tokenizer.lisp
   "LOAD-TOKENIZER" "TOKENIZE" "DETOKENIZE" "TOKENIZER" "TOKENIZER-P" "TOKEN-PIECE"
   "VOCABULARY-SIZE" "TOKENIZER-ERROR" "TOKENIZER-ERROR-PATH")
  (:documentation "The ModernBERT encoder of a modern-bert GGUF file:
MODEL:LOAD reads its tensors and hyper-parameters, MODEL:ENCODE runs the
forward pass (doc/encoder.md) on token ids, Lisp driving the graph and the VEC
kernels doing the arithmetic; MODEL:TOKENIZE turns text into those ids."))

(defpackage "RONTOLISP-USER"
  (:use "CL")
  (:documentation "The package the REPL and scripts start in."))
