;;;; packages.lisp - every package of rontolisp, in one place.
;;;;
;;;; rontolisp is ECL with native primitives for quantized language models:
;;;; ggml's Q8_0 format, a quantized matrix that answers CL's array functions,
;;;; a deterministic matrix-vector product and the GGUF container.  Each
;;;; package is a layer of lisp/ (README.org's Layout draws them), from the
;;;; bottom: RONTOLISP (conditions.lisp, base/, quant/: the conditions,
;;;; files, threads, the number formats and the quantized matrix), TEXT
;;;; (text/: JSON, templates, regular expressions) and VEC and LINALG (vec/),
;;;; GGUF (gguf/), MODEL (model/), and COMMAND-LINE (session/, jobs/,
;;;; commands/: main, the commands and the jobs behind them, the REPL,
;;;; Swank).  A layer uses only the layers below it
;;;; (tests/lisp/test-packages.lisp reads every file to check it).  User code
;;;; reaches the public API by prefix (`rontolisp:quantize', `vec:matvec',
;;;; `gguf:read'); what TEXT and COMMAND-LINE define for users is exported
;;;; from RONTOLISP, which they use.  GGUF and MODEL export names CL has too,
;;;; so USE-PACKAGE of them needs a SHADOWING-IMPORT first (their docstrings
;;;; say which).  Primitives implemented in C are internal and start with %.
;;;; The REPL and scripts start in RONTOLISP-USER, which uses only CL.
;;;;
;;;; A layer takes internal names from a lower one only as stated here: the
;;;; lower one lists under :intern what it offers (names that are no public
;;;; API), the higher one names them under :import-from.  A name in neither
;;;; list is private to its package.

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
   "OUTLIER-COLUMNS" "CHANNEL-SPREAD"
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
  ;; What the layers above take (see above).
  (:intern
   "%EXIT"
   "%ADD-INTO" "%ATTENTION" "%ATTENTION-ROWS" "%BENCH-FILL-RANDOM" "%BENCH-MATMUL"
   "%BENCH-MATVEC" "%BENCH-NOW-NS" "%BENCH-PEAK" "%BENCH-QUANTIZE" "%BENCH-READ-GBPS"
   "%BIAS-ACT" "%CLOSE-FD" "%CPU-INFO" "%DOUBLE-TO-SINGLE" "%EXIT-PROCESS" "%FIRST-NON-FINITE"
   "%GATHER-ROWS" "%GEGLU" "%GGML-TYPE" "%HALF-TO-SINGLE-INTO"
  
   "%ISATTY" "%JSON-PARSE" "%KEEP-ESCAPED-BYTES" "%LAYER-NORM" "%LAYER-NORM-BIAS"
   "%LINE-EDITOR-READ" "%LINE-EDITOR-START" "%MAKE-BFLOAT16-ARRAY" "%MAKE-FLOAT16-ARRAY"
   "%MAKE-QUANTIZED-MATRIX" "%MATMUL" "%MATMUL-Q8-TILES" "%MATMUL-ROWS" "%MATVEC" "%MATVEC-Q8X2"
   "%NUMBERS-TEXT" "%OCTETS-OF" "%OUTLIER-MATMUL" "%OUTPUT-CLOSED-P" "%Q8-ROW-INTO" "%QKV-ROPE"
   "%RANDOM-NORMAL-FILL" "%READ-FILE-OCTETS" "%READ-SOME" "%RELEASE" "%RESOLVE-TARGET"
   "%ROPE-NEOX" "%SET-BEGIN" "%SET-COMMIT" "%SET-END" "%SET-MATRIX-ROWS" "%SHA256-BLOCKS"
   "%SINGLE-BITS" "%SOFTMAX-INTO" "%ST-COPY-TENSOR" "%ST-METADATA" "%ST-OPEN" "%ST-TENSORS"
   "%STREAM-TENSOR"
   "%THREADS-KNOB"
  
   "%UTF8-OCTETS" "%UTF8-STRING" "*PROGRESS*"
   "ABSOLUTE-NAMESTRING" "BLOCK-ABSMAX" "COMPUTED-TYPES" "DEFINE-ERROR" "DELETE-PATH"
   "DESCRIBE-OBJECT-TYPE" "DIRECTORY-ENTRIES" "ENDS-WITH" "ENSURE-DIRECTORIES" "ERROR-MESSAGE"
   "FIND-GGML-TYPE" "FIND-TENSOR-TYPE" "FIRST-NON-FINITE" "FORMAT-DESCRIPTION" "GGML-ID"
   "GGML-TYPE-BITS" "GGML-TYPE-BLOCK-SIZE" "GGML-TYPE-ID" "GGUF-VALUE-TYPES"
   "LINE-EDITOR-PROMPT" "MAX-THREADS" "ONE-LINE" "OPEN-INPUT-FD" "OPEN-INPUT-OCTETS"
   "OUTLIER-MASK" "PACKED-DIMENSIONS" "PACKED-NUMBERS" "PATH-KIND" "PATH-OCTETS"
   "PROGRESS-LINES" "PROGRESS-REPORTER" "Q8-0-MATRIX-P" "QM-AREF" "QM-BYTE-SIZE"
   "QUANTIZABLE-TENSOR-P" "QUANTIZED-FORMAT-OF-TYPE-ID" "QUANTIZED-MATRIX-COLS"
   "QUANTIZED-MATRIX-DIMS" "QUANTIZED-MATRIX-FORMAT" "QUANTIZED-MATRIX-ROWS"
   "QUANTIZED-MATRIX-TYPE-ID" "QUANTIZED-TYPE-P" "READ-FILE-OCTETS" "READ-NESTING-ERROR"
   "REGEX-ERROR" "REPLACE-ALL" "REQUEST-ERROR" "REQUEST-ERROR-STATUS" "REQUEST-ERROR-TYPE"
   "SPLIT-ON" "SUMMARIZE-ARGUMENT" "TEMPORARY-NAME" "TEMPORARY-PATH" "TENSOR-TYPE"
   "TENSOR-TYPE-ID" "TENSOR-TYPE-KEYWORD" "TENSOR-TYPE-NAME" "TENSOR-TYPE-OF" "TRIM-DIMS"
   "WEIGHT-FOR-PRODUCTS" "WITH-MESSAGE-PRINTING" "WITH-OUTPUT-TO-FILE" "WITH-TEMPORARY-FILE"
   "WRITE-FILE-ATOMICALLY"))

(defpackage "VEC"
  (:use "CL" "RONTOLISP")
  (:import-from "RONTOLISP"
   "%ATTENTION" "%DOUBLE-TO-SINGLE" "%GEGLU" "%LAYER-NORM" "%MATMUL" "%MATMUL-ROWS" "%MATVEC"
   "%MATVEC-Q8X2"
   "%OUTLIER-MATMUL" "%Q8-ROW-INTO" "%ROPE-NEOX" "BLOCK-ABSMAX" "DESCRIBE-OBJECT-TYPE"
   "PACKED-NUMBERS" "QUANTIZED-MATRIX-COLS" "QUANTIZED-MATRIX-DIMS" "QUANTIZED-MATRIX-ROWS")
  ;; what MODEL takes: the kernels' status turned into a condition, and
  ;; the outlier matrix of quantize at load (vec/outlier-matrix.lisp)
  (:intern "KERNEL-FAILURE" "%MAKE-OUTLIER-MATRIX" "SPLIT-COLUMNS")
  (:export
   ;; matrix times vector: a quantized matrix or the f32 baseline
   "MATVEC" "MATVEC-INTO"
   ;; the encoder's steps (encoder.lisp): matrix times a sequence, then
   ;; LayerNorm, rotary embedding, attention and GeGLU on n x d arrays
   "MATMUL" "MATMUL-INTO" "MATMUL-ROWS-INTO" "LAYER-NORM" "ROPE-NEOX" "ATTENTION" "GEGLU"
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

(defpackage "TEXT"
  (:use "CL" "RONTOLISP")
  (:import-from "RONTOLISP"
   "%JSON-PARSE" "%NUMBERS-TEXT" "%UTF8-OCTETS" "ABSOLUTE-NAMESTRING" "READ-FILE-OCTETS"
   "REGEX-ERROR" "PATH-KIND" "WITH-OUTPUT-TO-FILE" "WITH-TEMPORARY-FILE" "WRITE-FILE-ATOMICALLY")
  ;; the layer's interface: what the model and the command line take
  ;; (the user's names are RONTOLISP's, above)
  (:export
   "COMPILE-REGEX" "FLOAT-TEXT" "JSON-ARRAY-P" "JSON-BRIEF" "JSON-FLOAT-STRING"
   "JSON-TYPE-MISMATCH" "PARSE-JSON-OCTETS" "REGEX-PARSER" "REGEX-SEARCH" "REGEX-SOURCE"
   "WRITE-ESCAPED" "WRITE-JSON" "WRITE-NEWLINE" "WRITE-NUMBERS"
   ;; template.lisp: a question's text rendered into its scratch
   "MAKE-RENDER-SCRATCH" "RENDER-TEMPLATE-INTO"
   ;; html.lisp: the pages of serve and export
   "SOURCE-FILE-TEXT" "HTML-TEXT" "FILL-PAGE"
   ;; svg.lisp: the --svg pictures
   "CHECK-SVG-TARGET" "WRITE-SVG-FIGURE")
  (:documentation "Text in and out: JSON reading and writing, the chat
templates (a Jinja subset), the regular expressions of inspect's filters and
the SVG pictures of --svg.
Its public names are RONTOLISP's (rontolisp:parse-json,
rontolisp:compile-template, rontolisp:render-template)."))

(defpackage "GGUF"
  (:use "CL")
  (:shadow "READ" "WRITE" "CLOSE")
  (:import-from "RONTOLISP"
   "%DOUBLE-TO-SINGLE" "%GGML-TYPE" "%MAKE-BFLOAT16-ARRAY" "%MAKE-FLOAT16-ARRAY"
   "%MAKE-QUANTIZED-MATRIX" "%RELEASE" "%RESOLVE-TARGET" "%SET-BEGIN" "%SET-COMMIT" "%SET-END"
   "%STREAM-TENSOR" "%UTF8-OCTETS" "ABSOLUTE-NAMESTRING" "DEFINE-ERROR" "ERROR-MESSAGE"
   "FIND-TENSOR-TYPE" "GGUF-VALUE-TYPES" "PACKED-DIMENSIONS" "PATH-KIND" "PATH-OCTETS"
   "QUANTIZED-FORMAT-OF-TYPE-ID" "QUANTIZED-MATRIX-TYPE-ID" "TEMPORARY-NAME" "TENSOR-TYPE-ID"
   "TENSOR-TYPE-KEYWORD" "TENSOR-TYPE-OF")
  ;; what the model and the jobs take: a file's metadata and tensor
  ;; table, array values element by element
  (:intern
   "GGUF-FILE-BY-NAME" "GGUF-FILE-METADATA" "MAP-ELEMENTS" "PADDED" "TENSOR-TABLE"
   "TI-ABSOLUTE" "TI-NAME")
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
   "%ADD-INTO" "%ATTENTION" "%ATTENTION-ROWS" "%BENCH-NOW-NS" "%BIAS-ACT"
   "%DOUBLE-TO-SINGLE" "%FIRST-NON-FINITE" "%GATHER-ROWS" "%GEGLU" "%LAYER-NORM"
   "%LAYER-NORM-BIAS" "%QKV-ROPE" "%SET-MATRIX-ROWS" "%SOFTMAX-INTO"
   "%UTF8-OCTETS"
   "ABSOLUTE-NAMESTRING" "DEFINE-ERROR" "DESCRIBE-OBJECT-TYPE"
   "FIND-TENSOR-TYPE" "FIRST-NON-FINITE" "OPEN-INPUT-OCTETS"
   "PACKED-DIMENSIONS" "PROGRESS-REPORTER" "QUANTIZABLE-TENSOR-P" "TENSOR-TYPE-KEYWORD"
   "WEIGHT-FOR-PRODUCTS")
  (:import-from "TEXT"
   "FLOAT-TEXT" "JSON-ARRAY-P" "JSON-BRIEF" "JSON-TYPE-MISMATCH" "MAKE-RENDER-SCRATCH"
   "RENDER-TEMPLATE-INTO")
  (:import-from "VEC"
   "%MAKE-OUTLIER-MATRIX" "KERNEL-FAILURE" "SPLIT-COLUMNS")
  (:import-from "GGUF"
   "TENSOR-TABLE")
  ;; what the command line takes: the encoder's and the tokenizer's parts
  (:intern
   "*STAGE-CLOCK*" "BUILD-TOKENIZER" "CALIBRATION-OUTLIER-TABLE" "CALIBRATION-OUTLIERS"
   "CALIBRATION-SEQUENCES" "CHECK-TEXT" "DECISION-HEAD-P" "DECISION-LOGITS"
   "EMBEDDING-AS-SINGLE" "EMBEDDING-ROWS" "ENCODER-FILE"
   "ENCODER-HYPERPARAMETERS" "ENCODER-LAYERS" "ENCODER-PATH" "ENCODER-TOKEN-EMBEDDING"
   "ENCODER-TOKENIZER" "FILE-POOLING" "HEAD-OF" "JSON-TOKENIZER-SPEC"
   "MAKE-STAGE-CLOCK" "MERGE-STRING" "NORMALIZE-EMBEDDING"
   "OPTION-TEXT" "POOL"
   "QUESTION-FIELD" "CHECK-TOKEN-IDS" "%TOK-VOCAB-SIZE" "PARSE-QUESTION" "PARSED-QUESTION-OPTIONS" "PARSED-QUESTION-TYPE" "QUESTION-MACS"
   "STAGE-CLOCK-TOTALS" "TOKENIZE-OCTETS" "TOKENIZER-HANDLE" "TOKENIZER-OF" "TOKENIZER-PATH"
  )
  (:export
   "LOAD" "ENCODE" "CALIBRATE" "ENCODER" "ENCODER-P" "HYPERPARAMETERS" "*LAYER-HOOK*"
   "MODEL-ERROR" "MODEL-ERROR-PATH"
   ;; decision.lisp
   "RENDER" "DECIDE" "PREPARE-DECIDE" "QUESTION-ERROR" "*QUESTIONS*" "MAKE-ANSWER"
   ;; tokenizer.lisp
   "LOAD-TOKENIZER" "TOKENIZE" "DETOKENIZE" "DETOKENIZE-OCTETS" "TOKENIZER" "TOKENIZER-P"
   "TOKEN-PIECE" "VOCABULARY-SIZE" "TOKENIZER-ERROR" "TOKENIZER-ERROR-PATH")
  (:documentation "The ModernBERT encoder of a modern-bert GGUF file:
MODEL:LOAD reads its tensors and hyper-parameters, MODEL:ENCODE runs the
forward pass (doc/encoder.md) on token ids, Lisp driving the graph and the VEC
kernels doing the arithmetic; MODEL:TOKENIZE turns text into those ids.
MODEL:LOAD is not CL:LOAD: to USE-PACKAGE MODEL, first
(shadowing-import 'model:load) (CL's LOAD then needs the CL: prefix) or
(shadowing-import 'cl:load); without either, USE-PACKAGE signals a name
conflict and changes nothing."))

(defpackage "COMMAND-LINE"
  (:use "CL" "RONTOLISP")
  (:import-from "RONTOLISP"
   "%CLOSE-FD" "%READ-SOME" "OPEN-INPUT-FD"
   "%EXIT"
   "%BENCH-FILL-RANDOM" "%BENCH-MATMUL" "%BENCH-MATVEC" "%BENCH-NOW-NS" "%BENCH-PEAK"
   "%BENCH-QUANTIZE" "%BENCH-READ-GBPS" "%CPU-INFO" "%EXIT-PROCESS" "%GGML-TYPE"
   "%HALF-TO-SINGLE-INTO"
   "%ISATTY" "%KEEP-ESCAPED-BYTES"
   "%LINE-EDITOR-READ" "%LINE-EDITOR-START" "%MAKE-BFLOAT16-ARRAY" "%MAKE-FLOAT16-ARRAY"
   "%MATMUL-Q8-TILES" "%OCTETS-OF" "%OUTPUT-CLOSED-P" "%RANDOM-NORMAL-FILL" "%READ-FILE-OCTETS"
   "%RELEASE" "%SHA256-BLOCKS" "%SINGLE-BITS" "%ST-COPY-TENSOR" "%ST-METADATA" "%ST-OPEN"
   "%ST-TENSORS" "%THREADS-KNOB" "%UTF8-OCTETS"
   "%UTF8-STRING" "*PROGRESS*" "ABSOLUTE-NAMESTRING" "COMPUTED-TYPES" "DELETE-PATH"
   "DIRECTORY-ENTRIES" "ENDS-WITH" "ENSURE-DIRECTORIES" "FIND-GGML-TYPE" "FIND-TENSOR-TYPE"
   "FIRST-NON-FINITE" "FORMAT-DESCRIPTION" "GGML-ID" "GGML-TYPE-BITS" "GGML-TYPE-BLOCK-SIZE"
   "GGML-TYPE-ID" "LINE-EDITOR-PROMPT" "MAX-THREADS" "ONE-LINE" "OPEN-INPUT-OCTETS"
   "OUTLIER-MASK" "PACKED-DIMENSIONS" "PATH-KIND" "PATH-OCTETS" "PROGRESS-LINES"
   "PROGRESS-REPORTER" "Q8-0-MATRIX-P" "QM-AREF" "QM-BYTE-SIZE" "QUANTIZABLE-TENSOR-P"
   "QUANTIZED-MATRIX-DIMS" "QUANTIZED-MATRIX-FORMAT" "QUANTIZED-TYPE-P" "READ-FILE-OCTETS"
   "READ-NESTING-ERROR" "REPLACE-ALL" "REQUEST-ERROR" "REQUEST-ERROR-STATUS"
   "REQUEST-ERROR-TYPE" "SPLIT-ON" "SUMMARIZE-ARGUMENT" "TEMPORARY-PATH" "TENSOR-TYPE"
   "TENSOR-TYPE-KEYWORD" "TENSOR-TYPE-NAME" "TENSOR-TYPE-OF" "TRIM-DIMS"
   "WITH-MESSAGE-PRINTING" "WITH-OUTPUT-TO-FILE" "WITH-TEMPORARY-FILE" "WRITE-FILE-ATOMICALLY")
  (:import-from "TEXT"
   "COMPILE-REGEX" "FLOAT-TEXT" "JSON-ARRAY-P" "JSON-BRIEF" "JSON-FLOAT-STRING"
   "JSON-TYPE-MISMATCH" "PARSE-JSON-OCTETS" "REGEX-PARSER" "REGEX-SEARCH" "REGEX-SOURCE"
   "WRITE-ESCAPED" "WRITE-JSON" "WRITE-NEWLINE" "WRITE-NUMBERS"
   "SOURCE-FILE-TEXT" "HTML-TEXT" "FILL-PAGE" "CHECK-SVG-TARGET" "WRITE-SVG-FIGURE")
  (:import-from "GGUF"
   "GGUF-FILE-BY-NAME" "GGUF-FILE-METADATA" "MAP-ELEMENTS" "PADDED" "TI-ABSOLUTE" "TI-NAME")
  (:import-from "MODEL"
   "%TOK-VOCAB-SIZE"
   "CHECK-TOKEN-IDS"
   "*STAGE-CLOCK*" "BUILD-TOKENIZER" "CALIBRATION-OUTLIER-TABLE" "CALIBRATION-OUTLIERS"
   "CALIBRATION-SEQUENCES" "CHECK-TEXT" "DECISION-HEAD-P" "DECISION-LOGITS"
   "EMBEDDING-AS-SINGLE" "EMBEDDING-ROWS" "ENCODER-FILE"
   "ENCODER-HYPERPARAMETERS" "ENCODER-LAYERS" "ENCODER-PATH" "ENCODER-TOKEN-EMBEDDING"
   "ENCODER-TOKENIZER" "FILE-POOLING" "HEAD-OF" "JSON-TOKENIZER-SPEC"
   "MAKE-STAGE-CLOCK" "MERGE-STRING" "NORMALIZE-EMBEDDING"
   "OPTION-TEXT" "POOL"
   "QUESTION-FIELD" "PARSE-QUESTION" "PARSED-QUESTION-OPTIONS" "PARSED-QUESTION-TYPE" "QUESTION-MACS"
   "STAGE-CLOCK-TOTALS" "TOKENIZE-OCTETS" "TOKENIZER-HANDLE" "TOKENIZER-OF" "TOKENIZER-PATH"
  )
  (:documentation "The command line and the Lisp session: MAIN, the
subcommands (define-command), the jobs they run (inspect, quantize, convert,
bench, eval, export, serve, ...), the REPL, scripts and Swank.  Its public
names are RONTOLISP's (rontolisp:main, rontolisp:quantize-file,
rontolisp:convert-hf, ...)."))

(defpackage "RONTOLISP-USER"
  (:use "CL")
  (:documentation "The package the REPL and scripts start in.  It uses only
CL: the other packages are reached by prefix.  RONTOLISP, VEC and LINALG
can be USEd as they are; GGUF and MODEL export READ, WRITE, CLOSE and LOAD,
which CL has too (see their docstrings for the SHADOWING-IMPORT to do
first), and GGUF:VERSION and RONTOLISP:VERSION conflict."))
