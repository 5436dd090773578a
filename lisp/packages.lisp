;;;; packages.lisp - every package of rontolisp, in one place.
;;;;
;;;; rontolisp is ECL with native primitives for quantized language models:
;;;; ggml's Q8_0 format, a quantized matrix that answers CL's array functions,
;;;; a deterministic matrix-vector product and the GGUF container.  Each
;;;; module is a package with its folder of lisp/: RONTOLISP (the runtime,
;;;; the number formats and the quantized matrix, the tools and commands),
;;;; VEC and LINALG (vec/), GGUF (gguf/), MODEL (model/).  User code reaches
;;;; the public API by prefix (`rontolisp:quantize', `vec:matvec',
;;;; `gguf:read'); GGUF and MODEL export names CL has too, so USE-PACKAGE of
;;;; them needs a SHADOWING-IMPORT first (their docstrings say which).
;;;; Primitives implemented in C are internal and start with %.  The REPL and
;;;; scripts start in RONTOLISP-USER, which uses only CL.
;;;;
;;;; Modules use each other's internals only through the internal interface
;;;; stated here: a module lists under :intern what it offers the others
;;;; (names that are no public API) and under :import-from what it takes;
;;;; the tools and commands (RONTOLISP) take theirs from GGUF and MODEL
;;;; with IMPORT-INTERNALS at the end of this file.  A name in neither list
;;;; is private to its module.

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
   "TEMPLATE-ERROR" "TEMPLATE-ERROR-OFFSET" "*TEMPLATE-NESTING-LIMIT*"
   "*TEMPLATE-MAX-ITERATIONS*" "*TEMPLATE-MAX-LENGTH*")
  ;; The internal interface the other modules import (see above).
  (:intern
   ;; conditions.lisp: the modules define and signal their conditions
   "DEFINE-ERROR" "ERROR-MESSAGE"
   ;; files (runtime/files.lisp)
   "PATH-OCTETS" "PATH-KIND" "ABSOLUTE-NAMESTRING" "TEMPORARY-NAME"
   ;; arrays and the quantized matrix (quant/)
   "DESCRIBE-OBJECT-TYPE" "PACKED-NUMBERS" "PACKED-DIMENSIONS" "BLOCK-ABSMAX"
   "QUANTIZED-MATRIX-ROWS" "QUANTIZED-MATRIX-COLS" "QUANTIZED-MATRIX-DIMS"
   ;; ggml's tensor types (quant/formats.lisp)
   "FIND-TENSOR-TYPE" "TENSOR-TYPE-KEYWORD" "TENSOR-TYPE-OF" "TENSOR-TYPE-ID"
   "GGUF-VALUE-TYPES"
   ;; the quantized types of a matrix (quant/qmatrix-types.lisp)
   "QUANTIZED-FORMAT-OF-TYPE-ID" "QUANTIZED-MATRIX-TYPE-ID" "WEIGHT-FOR-PRODUCTS"
   ;; primitives (prims/ecl/) the other modules call
   "%DOUBLE-TO-SINGLE" "%UTF8-OCTETS" "%GGML-TYPE"
   "%MAKE-FLOAT16-ARRAY" "%MAKE-BFLOAT16-ARRAY" "%MAKE-QUANTIZED-MATRIX"
   "%RELEASE" "%STREAM-TENSOR" "%RESOLVE-TARGET" "%SET-BEGIN" "%SET-COMMIT" "%SET-END"
   "%MATVEC" "%MATVEC-Q8X2" "%Q8-ROW-INTO" "%MATMUL" "%OUTLIER-MATMUL" "%LAYER-NORM"
   "%ROPE-NEOX" "%ATTENTION" "%GEGLU"
   ;; what MODEL takes besides: files, JSON, calibration, progress
   "OPEN-INPUT-OCTETS" "OPEN-INPUT-FD" "%READ-SOME" "%CLOSE-FD" "READ-FILE-OCTETS"
   "WRITE-JSON" "WRITE-NUMBERS" "WRITE-ESCAPED" "JSON-BRIEF"
   "JSON-ARRAY-P" "JSON-TYPE-MISMATCH"
   "MERGE-STRING" "FLOAT-TEXT" "PROGRESS-REPORTER" "READ-CALIBRATION"
   "CALIBRATION-OUTLIER-TABLE"
   "WRITE-FILE-ATOMICALLY" "%SINGLE-BITS"
   "%UTF8-STRING" "%FIRST-NON-FINITE" "%ADD-INTO" "%BIAS-ACT" "%GATHER-ROWS"
   "%LAYER-NORM-BIAS" "%QKV-ROPE" "%BENCH-NOW-NS" "%ATTENTION-ROWS" "%SET-MATRIX-ROWS"
   "%TOK-NEW" "%TOK-ENCODE" "%TOK-ENCODE-OFFSETS" "%TOK-DECODE" "%TOK-PIECE"
   "%TOK-VOCAB-SIZE"))

(defpackage "VEC"
  (:use "CL" "RONTOLISP")
  (:import-from "RONTOLISP"
   "DESCRIBE-OBJECT-TYPE" "PACKED-NUMBERS" "BLOCK-ABSMAX"
   "QUANTIZED-MATRIX-ROWS" "QUANTIZED-MATRIX-COLS" "QUANTIZED-MATRIX-DIMS"
   "%DOUBLE-TO-SINGLE" "%MATVEC" "%MATVEC-Q8X2" "%Q8-ROW-INTO" "%MATMUL" "%OUTLIER-MATMUL"
   "%LAYER-NORM" "%ROPE-NEOX" "%ATTENTION" "%GEGLU")
  ;; what MODEL takes: the kernels' status turned into a condition, and
  ;; the outlier matrix of quantize at load (vec/outlier-matrix.lisp)
  (:intern "KERNEL-FAILURE" "%MAKE-OUTLIER-MATRIX" "SPLIT-COLUMNS")
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
  (:import-from "RONTOLISP"
   "DEFINE-ERROR" "ERROR-MESSAGE" "RONTOLISP-ERROR"
   "PATH-OCTETS" "PATH-KIND" "ABSOLUTE-NAMESTRING" "TEMPORARY-NAME" "PACKED-DIMENSIONS"
   "FIND-TENSOR-TYPE" "TENSOR-TYPE-KEYWORD" "TENSOR-TYPE-OF" "TENSOR-TYPE-ID"
   "GGUF-VALUE-TYPES" "QUANTIZED-FORMAT-OF-TYPE-ID" "QUANTIZED-MATRIX-TYPE-ID"
   "%DOUBLE-TO-SINGLE" "%UTF8-OCTETS" "%GGML-TYPE"
   "%MAKE-FLOAT16-ARRAY" "%MAKE-BFLOAT16-ARRAY" "%MAKE-QUANTIZED-MATRIX"
   "%RELEASE" "%STREAM-TENSOR" "%RESOLVE-TARGET" "%SET-BEGIN" "%SET-COMMIT" "%SET-END")
  ;; what the tools (inspect, split, edit, quantize) take: a file's
  ;; metadata and tensor table, array values element by element
  (:intern "MAP-ELEMENTS" "PADDED" "TI-ABSOLUTE" "TI-NAME" "TENSOR-TABLE"
           "GGUF-FILE-METADATA" "GGUF-FILE-BY-NAME")
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
model container.  GGUF:READ, GGUF:WRITE and GGUF:CLOSE are not CL's: to
USE-PACKAGE GGUF, first (shadowing-import '(gguf:read gguf:write gguf:close))
(CL's then need the CL: prefix), or leave them out with
(shadowing-import '(cl:read cl:write cl:close)); without either, USE-PACKAGE
signals a name conflict and changes nothing.  GGUF:VERSION conflicts with
RONTOLISP:VERSION in a package that uses both."))

(defpackage "MODEL"
  (:use "CL" "RONTOLISP")
  (:shadow "LOAD")
  (:import-from "RONTOLISP"
   "DEFINE-ERROR" "ERROR-MESSAGE" "DESCRIBE-OBJECT-TYPE" "PACKED-DIMENSIONS"
   "WEIGHT-FOR-PRODUCTS" "ABSOLUTE-NAMESTRING" "OPEN-INPUT-OCTETS" "READ-FILE-OCTETS" "WRITE-JSON" "WRITE-ESCAPED"
   "OPEN-INPUT-FD" "%READ-SOME" "%CLOSE-FD" "WRITE-NUMBERS" "JSON-BRIEF" "JSON-ARRAY-P" "JSON-TYPE-MISMATCH" "MERGE-STRING" "FLOAT-TEXT" "PROGRESS-REPORTER" "READ-CALIBRATION"
   "CALIBRATION-OUTLIER-TABLE"
   "WRITE-FILE-ATOMICALLY" "%SINGLE-BITS"
   "%DOUBLE-TO-SINGLE" "%UTF8-OCTETS" "%UTF8-STRING" "%FIRST-NON-FINITE" "%ADD-INTO"
   "%BIAS-ACT" "%GATHER-ROWS" "%LAYER-NORM" "%LAYER-NORM-BIAS" "%QKV-ROPE" "%ATTENTION"
   "%GEGLU" "%BENCH-NOW-NS" "%ATTENTION-ROWS" "%SET-MATRIX-ROWS" "%TOK-NEW" "%TOK-ENCODE"
   "%TOK-ENCODE-OFFSETS" "%TOK-DECODE" "%TOK-PIECE" "%TOK-VOCAB-SIZE")
  (:import-from "VEC" "KERNEL-FAILURE" "%MAKE-OUTLIER-MATRIX" "SPLIT-COLUMNS")
  (:import-from "GGUF" "TENSOR-TABLE")
  ;; what the tools and commands take (IMPORT-INTERNALS below): the
  ;; encoder's and the tokenizer's parts, and the steps of the embed,
  ;; tokenize and decide commands
  (:intern "ENCODER-PATH" "ENCODER-TOKENIZER" "ENCODER-HYPERPARAMETERS"
           "ENCODER-TOKEN-EMBEDDING" "ENCODER-LAYERS" "TOKENIZER-PATH" "TOKENIZER-HANDLE"
           "BUILD-TOKENIZER" "JSON-TOKENIZER-SPEC" "TOKENIZER-OF" "TOKENIZE-OCTETS"
           "CHECK-TEXT" "WRITE-IDS-LINE" "PARSE-TOKEN-LIST"
           "MAP-FILE-LINES" "LINES-NAME" "MAP-TOKEN-FILE" "OPTION-KEYWORD" "RUN-TOKENIZER-BENCH" "SPLIT-LINES"
           "NORMALIZED-EMBEDDINGS" "EMBEDDING-ROWS" "EMBEDDING-AS-SINGLE" "FILE-POOLING" "POOL"
           "NORMALIZE-EMBEDDING" "PARSE-NORMALIZE" "CALIBRATION-SEQUENCES"
           "SPLIT-AT-SEPARATOR" "WRITE-EMBEDDINGS-DOCUMENT" "WRITE-NPY" "FLOAT32-OCTETS"
           "DECISION-HEAD-P" "HEAD-OF" "DECIDE-LINE" "QUESTION-BINDINGS" "OPTION-TEXT"
           "ENCODER-FILE"
           "*STAGE-CLOCK*" "MAKE-STAGE-CLOCK" "STAGE-CLOCK-TOTALS" "QUESTION-MACS"
           "DECISION-LOGITS" "QUESTION-FIELD")
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
kernels doing the arithmetic; MODEL:TOKENIZE turns text into those ids.
MODEL:LOAD is not CL:LOAD: to USE-PACKAGE MODEL, first
(shadowing-import 'model:load) (CL's LOAD then needs the CL: prefix) or
(shadowing-import 'cl:load); without either, USE-PACKAGE signals a name
conflict and changes nothing."))

(defpackage "RONTOLISP-USER"
  (:use "CL")
  (:documentation "The package the REPL and scripts start in.  It uses only
CL: the other packages are reached by prefix.  RONTOLISP, VEC and LINALG
can be USEd as they are; GGUF and MODEL export READ, WRITE, CLOSE and LOAD,
which CL has too (see their docstrings for the SHADOWING-IMPORT to do
first), and GGUF:VERSION and RONTOLISP:VERSION conflict."))

(defun rontolisp::import-internals (from names)
  "Make the internal symbols NAMES (strings) of the package FROM, which
lists them under :intern, accessible in RONTOLISP: the tools and commands
of RONTOLISP use them (the internal interface, see the top of this file)."
  (import (mapcar (lambda (name)
                    (or (find-symbol name from)
                        (error "packages.lisp: expected ~A::~A in the internal interface, ~
                                found no such symbol" from name)))
                  names)
          "RONTOLISP"))

(rontolisp::import-internals "GGUF" '("MAP-ELEMENTS" "PADDED" "TI-ABSOLUTE" "TI-NAME"
                                      "TENSOR-TABLE" "GGUF-FILE-METADATA"
                                      "GGUF-FILE-BY-NAME"))
(rontolisp::import-internals
 "MODEL" '("ENCODER-PATH" "ENCODER-TOKENIZER" "ENCODER-HYPERPARAMETERS"
           "ENCODER-TOKEN-EMBEDDING" "ENCODER-LAYERS" "TOKENIZER-PATH" "TOKENIZER-HANDLE"
           "BUILD-TOKENIZER" "JSON-TOKENIZER-SPEC" "TOKENIZER-OF" "TOKENIZE-OCTETS"
           "CHECK-TEXT" "WRITE-IDS-LINE" "PARSE-TOKEN-LIST"
           "MAP-FILE-LINES" "LINES-NAME" "MAP-TOKEN-FILE" "OPTION-KEYWORD" "RUN-TOKENIZER-BENCH" "SPLIT-LINES"
           "NORMALIZED-EMBEDDINGS" "EMBEDDING-ROWS" "EMBEDDING-AS-SINGLE" "FILE-POOLING" "POOL"
           "NORMALIZE-EMBEDDING" "PARSE-NORMALIZE" "CALIBRATION-SEQUENCES"
           "SPLIT-AT-SEPARATOR" "WRITE-EMBEDDINGS-DOCUMENT" "WRITE-NPY" "FLOAT32-OCTETS"
           "DECISION-HEAD-P" "HEAD-OF" "DECIDE-LINE" "QUESTION-BINDINGS" "OPTION-TEXT"
           "ENCODER-FILE"
           "*STAGE-CLOCK*" "MAKE-STAGE-CLOCK" "STAGE-CLOCK-TOTALS" "QUESTION-MACS"
           "DECISION-LOGITS" "QUESTION-FIELD"))
