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
;;;; say which).  Primitives implemented in C are internal, start with %
;;;; and are registered (prims/ecl/) straight into the package that uses
;;;; them.  The REPL and scripts start in RONTOLISP-USER, which uses only CL.
;;;;
;;;; What a layer offers the layers above is exported, under a comment
;;;; naming the interface ("base utilities for the layers above", "the
;;;; model's interface to the command line"), each name documented where
;;;; it is defined.  A few internal names still cross: the lower layer
;;;; lists them under :intern, the higher one under :import-from, and
;;;; test-packages.lisp counts them (*cross-layer-internal-limit*).  A name
;;;; in neither list is private to its package.

(defpackage "RONTOLISP"
  (:use "CL")
  (:shadow "EXIT")
  (:documentation "The rontolisp runtime: quantization, the quantized matrix,
the command line, and the root of every error the project signals.  It
also exports the base utilities the layers above share (errors, files,
threads, the type table, tensor data): code of the project, not an API
kept stable for users.")
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
   "*TEMPLATE-MAX-ITERATIONS*" "*TEMPLATE-MAX-LENGTH*"
   ;; Base utilities for the layers above (code of this project, not a
   ;; user's API), each documented where it is defined:
   ;; - errors and docstrings (conditions.lisp): defining a condition class,
   ;;   the message of a condition, an argument described in a message, the
   ;;   error classes the text layer and the command line signal, and the
   ;;   docstrings of a structure's functions
   "DEFINE-ERROR" "DOCUMENT-FUNCTIONS" "ERROR-MESSAGE" "DESCRIBE-OBJECT-TYPE"
   "SUMMARIZE-ARGUMENT" "ONE-LINE" "WITH-MESSAGE-PRINTING" "REGEX-ERROR" "READ-NESTING-ERROR"
   "REQUEST-ERROR" "REQUEST-ERROR-STATUS" "REQUEST-ERROR-TYPE"
   ;; - files (files.lisp, ecl-filenames.lisp): paths as bytes, reading,
   ;;   atomic writing, temporary files, directories, string splitting
   "ABSOLUTE-NAMESTRING" "PATH-KIND" "PATH-OCTETS" "READ-FILE-OCTETS" "OPEN-INPUT-FD"
   "OPEN-INPUT-OCTETS" "WRITE-FILE-ATOMICALLY" "WITH-OUTPUT-TO-FILE" "WITH-TEMPORARY-FILE"
   "TEMPORARY-NAME" "TEMPORARY-PATH" "SCRATCH-FILE-PATH" "REMOVE-SCRATCH-FILE" "DIRECTORY-ENTRIES" "DELETE-PATH" "ENSURE-DIRECTORIES"
   "SPLIT-ON" "REPLACE-ALL"
   ;; - threads and progress (runtime.lisp, progress.lisp)
   "MAX-THREADS" "*PROGRESS*" "PROGRESS-LINES" "PROGRESS-REPORTER"
   ;; - threads kept for the next job (threads.lisp)
   "START-SPARE-THREAD" "JOIN-SPARE-THREAD"
   ;; - the type table (formats.lisp, qmatrix-types.lisp): ggml's types,
   ;;   the ones Lisp holds, the quantized formats, GGUF's value types
   "FIND-GGML-TYPE" "GGML-ID" "GGML-TYPE-ID" "GGML-TYPE-BITS" "GGML-TYPE-BLOCK-SIZE"
   "TENSOR-TYPE" "FIND-TENSOR-TYPE" "TENSOR-TYPE-OF" "TENSOR-TYPE-ID" "TENSOR-TYPE-KEYWORD"
   "TENSOR-TYPE-NAME" "QUANTIZED-TYPE-P" "QUANTIZED-FORMAT-OF-TYPE-ID" "FORMAT-DESCRIPTION"
   "COMPUTED-TYPES" "GGUF-VALUE-TYPES"
   ;; - tensor data (halfarrays.lisp, qmatrix.lisp, selection.lisp,
   ;;   outliers.lisp): packed storage, the quantized matrix's shape and
   ;;   bytes, which tensors quantize
   "PACKED-DIMENSIONS" "PACKED-NUMBERS" "FIRST-NON-FINITE" "BLOCK-ABSMAX"
   "QUANTIZED-MATRIX-DIMS" "QUANTIZED-MATRIX-ROWS" "QUANTIZED-MATRIX-COLS"
   "QUANTIZED-MATRIX-TYPE-ID" "Q8-0-MATRIX-P" "QM-BYTE-SIZE" "WEIGHT-FOR-PRODUCTS"
   "TRIM-DIMS" "ENDS-WITH" "OUTLIER-MASK")
  ;; What the layers above take that is no stated interface: primitives
  ;; (C, prims/ecl/) several layers share (one layer's own are registered
  ;; into its package), the raw constructors of the packed arrays and the
  ;; quantized matrix, the catch tag of EXIT, and one name kept out of the
  ;; user's completions.
  (:intern
   "%BENCH-NOW-NS" "%DOUBLE-TO-SINGLE" "%EXIT" "%FIRST-NON-FINITE" "%GGML-TYPE"
   "%HALF-TO-SINGLE-INTO" "%ISATTY" "%MAKE-BFLOAT16-ARRAY" "%MAKE-FLOAT16-ARRAY"
   "%MAKE-QUANTIZED-MATRIX" "%READ-FILE-OCTETS" "%RELEASE" "%UTF8-OCTETS"
   "%UTF8-STRING"
   ;; which tensors quantize (selection.lisp), for calibration and quantize:
   ;; exported, it would stop rontolisp:quantiz<TAB> completing to
   ;; rontolisp:quantize
   "QUANTIZABLE-TENSOR-P"))

(defpackage "VEC"
  (:use "CL" "RONTOLISP")
  (:import-from "RONTOLISP" "%DOUBLE-TO-SINGLE")
  ;; what MODEL takes besides the exports: three of the kernels' primitives
  ;; and the outlier matrix of quantize at load (vec/outlier-matrix.lisp)
  (:intern "%ATTENTION" "%GEGLU" "%LAYER-NORM" "%MAKE-OUTLIER-MATRIX")
  (:export
   ;; for MODEL: a kernel's status turned into a condition, and a matrix
   ;; split into inlier and outlier columns
   "KERNEL-FAILURE" "SPLIT-COLUMNS"
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
  (:import-from "RONTOLISP" "%UTF8-OCTETS")
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
   "%MAKE-QUANTIZED-MATRIX" "%RELEASE"
 "%UTF8-OCTETS" "ABSOLUTE-NAMESTRING" "DEFINE-ERROR" "ERROR-MESSAGE"
   "FIND-TENSOR-TYPE" "GGUF-VALUE-TYPES" "PACKED-DIMENSIONS" "PATH-KIND" "PATH-OCTETS"
   "QUANTIZED-FORMAT-OF-TYPE-ID" "QUANTIZED-MATRIX-TYPE-ID" "TEMPORARY-NAME" "TENSOR-TYPE-ID"
   "TENSOR-TYPE-KEYWORD" "TENSOR-TYPE-OF")
  (:export
   ;; for the model and the jobs: the tensor table by name, array values
   ;; element by element, a size padded to the alignment
   "TENSOR-TABLE" "MAP-ELEMENTS" "PADDED"
   ;; reading
   "READ" "CLOSE" "WITH-FILE" "GGUF-FILE" "GGUF-FILE-P"
   "PATH" "VERSION" "ALIGNMENT" "FILE-SIZE" "DATA-OFFSET"
   "METADATA" "KEYS" "VALUE" "VALUE-TYPE" "TENSOR-NAMES" "TENSOR-INFO" "TENSOR" "TENSOR-OCTETS"
   "TENSOR-INFO-NAME" "TENSOR-INFO-SHAPE" "TENSOR-INFO-DIMS" "TENSOR-INFO-TYPE"
   "TENSOR-INFO-TYPE-ID" "TENSOR-INFO-OFFSET" "TENSOR-INFO-BYTES" "TENSOR-INFO-FILE-OFFSET"
   "TENSOR-INFOS" "TYPE-NAME"
   ;; writing
   "MAKE-FILE" "WRITE" "STREAM-PUT-TENSOR" "EDIT-FILE"
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
   "%BENCH-NOW-NS" "%DOUBLE-TO-SINGLE" "%FIRST-NON-FINITE" "%UTF8-OCTETS" "QUANTIZABLE-TENSOR-P")
  (:import-from "TEXT"
   "FLOAT-TEXT" "JSON-ARRAY-P" "JSON-BRIEF" "JSON-TYPE-MISMATCH" "MAKE-RENDER-SCRATCH"
   "RENDER-TEMPLATE-INTO")
  (:import-from "VEC"
   "%ATTENTION" "%GEGLU" "%LAYER-NORM" "%MAKE-OUTLIER-MATRIX" "KERNEL-FAILURE" "SPLIT-COLUMNS")
  (:import-from "GGUF"
   "TENSOR-TABLE")
  (:export
   "LOAD" "ENCODE" "CALIBRATE" "ENCODER" "ENCODER-P" "HYPERPARAMETERS" "*LAYER-HOOK*"
   "MODEL-ERROR" "MODEL-ERROR-PATH"
   ;; decision.lisp
   "RENDER" "DECIDE" "PREPARE-DECIDE" "QUESTION-ERROR" "*QUESTIONS*" "MAKE-ANSWER"
   ;; tokenizer.lisp
   "LOAD-TOKENIZER" "TOKENIZE" "DETOKENIZE" "DETOKENIZE-OCTETS" "TOKENIZER" "TOKENIZER-P"
   "TOKEN-PIECE" "VOCABULARY-SIZE" "TOKENIZER-ERROR" "TOKENIZER-ERROR-PATH"
   ;; The model's interface to the command line (not a user's API):
   ;; - the encoder's parts (the REPL's inspector, serve, eval) and pooling
   "ENCODER-PATH" "ENCODER-FILE" "ENCODER-TOKEN-EMBEDDING" "ENCODER-LAYERS"
   "ENCODER-TOKENIZER" "FILE-POOLING" "POOL" "NORMALIZE-EMBEDDING" "EMBEDDING-ROWS"
   "EMBEDDING-AS-SINGLE"
   ;; - calibration (quantize --calibration)
   "CALIBRATION-OUTLIER-TABLE" "CALIBRATION-OUTLIERS" "CALIBRATION-SEQUENCES"
   ;; - tokenizers built from tokenizer.json (convert) and text checked
   ;;   and tokenized as the jobs read it
   "BUILD-TOKENIZER" "JSON-TOKENIZER-SPEC" "MERGE-STRING" "TOKENIZER-OF" "TOKENIZE-OCTETS"
   "CHECK-TEXT" "CHECK-TOKEN-IDS"
   ;; - questions and the decision head (decide, serve, bench --questions)
   "PARSE-QUESTION" "QUESTION-FIELD" "OPTION-TEXT" "QUESTION-MACS" "DECISION-HEAD-P"
   "DECISION-LOGITS" "HEAD-OF" "PARSED-QUESTION-OPTIONS" "PARSED-QUESTION-TYPE"
   ;; - a tokenizer's file (the REPL's inspector) and C handle (tokenize --json)
   "TOKENIZER-PATH" "TOKENIZER-HANDLE"
   ;; - the stage clock of bench --questions --breakdown (stage-clock.lisp)
   "*STAGE-CLOCK*" "MAKE-STAGE-CLOCK" "STAGE-CLOCK-TOTALS")
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
   "%BENCH-NOW-NS" "%EXIT" "%GGML-TYPE" "%HALF-TO-SINGLE-INTO" "%ISATTY"
   "%MAKE-BFLOAT16-ARRAY" "%MAKE-FLOAT16-ARRAY" "%READ-FILE-OCTETS" "%RELEASE"
   "%UTF8-OCTETS" "%UTF8-STRING" "QUANTIZABLE-TENSOR-P")
  (:import-from "TEXT"
   "COMPILE-REGEX" "FLOAT-TEXT" "JSON-ARRAY-P" "JSON-BRIEF" "JSON-FLOAT-STRING"
   "JSON-TYPE-MISMATCH" "PARSE-JSON-OCTETS" "REGEX-PARSER" "REGEX-SEARCH" "REGEX-SOURCE"
   "WRITE-ESCAPED" "WRITE-JSON" "WRITE-NEWLINE" "WRITE-NUMBERS"
   "SOURCE-FILE-TEXT" "HTML-TEXT" "FILL-PAGE" "CHECK-SVG-TARGET" "WRITE-SVG-FIGURE")
  (:import-from "GGUF"
   "MAP-ELEMENTS" "PADDED")
  (:import-from "MODEL"
   "*STAGE-CLOCK*" "BUILD-TOKENIZER" "CALIBRATION-OUTLIER-TABLE" "CALIBRATION-OUTLIERS"
   "CALIBRATION-SEQUENCES" "CHECK-TEXT" "CHECK-TOKEN-IDS" "DECISION-HEAD-P" "DECISION-LOGITS"
   "EMBEDDING-AS-SINGLE" "EMBEDDING-ROWS" "ENCODER-FILE" "ENCODER-LAYERS" "ENCODER-PATH"
   "ENCODER-TOKEN-EMBEDDING" "ENCODER-TOKENIZER" "FILE-POOLING" "HEAD-OF" "JSON-TOKENIZER-SPEC"
   "MAKE-STAGE-CLOCK" "MERGE-STRING" "NORMALIZE-EMBEDDING" "OPTION-TEXT" "PARSE-QUESTION"
   "PARSED-QUESTION-OPTIONS" "PARSED-QUESTION-TYPE" "POOL" "QUESTION-FIELD" "QUESTION-MACS"
   "STAGE-CLOCK-TOTALS" "TOKENIZE-OCTETS" "TOKENIZER-HANDLE" "TOKENIZER-OF" "TOKENIZER-PATH")
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
