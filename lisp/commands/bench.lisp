;;;; commands/bench.lisp - `rontolisp bench': its command line; the work
;;;; is in jobs/bench.lisp.

(in-package "COMMAND-LINE")

(define-command "bench" (&optional file)
    (:usage "[FILE.gguf | --random NAME | --shape RxC ...] [--iters N] [--threads N] [--no-probe] [--json [FILE]] [--model FILE.gguf [--reference ORIG.gguf]] [--tokens N | --questions [--breakdown]] [--svg FILE] [--tokenizer FILE --text-file F]"
     :summary "time matrix-vector products (f32, Q8_0 scalar, SIMD, threads) against the read bandwidth"
     :details "Times y = W x for each matrix on the f32 path, the Q8_0 scalar reference
and the Q8_0 SIMD path with 1 thread and with all threads, and prints the
median microseconds per call, the weight GB/s, its share of the read
bandwidth a streaming probe measures in the same run, and the speed-up over
the f32 path; also quantize throughput (scalar vs SIMD).  FILE.gguf: every
2-D F32, F16, BF16 or Q8_0 tensor of the file (the f32 path on its f32 form,
Q8_0 on the file's own blocks or on the quantized tensor when its rows are
multiples of 32); then, under Products, its quantized tensors (Q8_0, legacy,
K, IQ4) timed in their own type, once per type and shape (the tensors
column counts them): one matrix-vector product on 1 thread (x quantized to
the type's activation blocks, then every row) in us and GB/s, beside the
same rows as f32 (dequantized once) and llama.cpp's product (ggml's
vec_dot, from libggml-cpu in RL_LLAMA_LIB's directory or build/cache/llama;
'ggml: not found (...)' without it) and ours/ggml; each the median of at
least --iters calls and 0.1 s.  The timed product must give the scalar
path's bits (a difference stops the run).  Without FILE.gguf, --random or
--shape: the standard shapes, then Q8_0 weights times 128 tokens as one
matmul (:q8 and :q8x2) against a matvec per token.  --tokenizer FILE --text-file F: the tokenizer
of FILE (a GGUF or a tokenizer.json) on each line of F, one thread, in MB/s
and tokens/s, with an empty cache and then warm (--iters passes, default 3).
--questions with --model FILE or --random NAME: a question's whole path
(render, tokenize, encode, head) per encoder format, 1 and 2 threads,
against llama.cpp's encoder alone on the same ids (--iters rounds, default
3), each format's max |dp| against F32, and its questions per second at 1
and 2 Lisp threads, one question per thread as decide --threads N answers
them (doc/decision.md).  --svg FILE with either also draws the run as a
self-contained SVG picture.
Progress goes to stderr, the table to stdout (to stderr when --json has
stdout).  Each probe keeps its figures in $XDG_CACHE_HOME/rontolisp/
read-bandwidth.json (~/.cache/rontolisp/ without XDG_CACHE_HOME), which
--no-probe reports, marked as cached, instead of reading the memory again."
     :options ((random "--random NAME"
                       :parse (choice-parser (cons "shapes" (mapcar #'first *presets*)))
                       :help "random weights: `shapes' is the standard set (64x192,
1024x1024, 4096x4096, 4096x14336 and one about 4x the last-level
cache); s1-pico, s1-nano, s1-micro are the converter's presets")
               (shapes "--shape RxC" :parse #'bench-parse-shape :repeat t
                       :help "time a random R x C matrix instead (repeatable)")
               (iters "--iters N" :parse (integer-parser :min 1 :max 1000000)
                      :default *bench-default-iters*
                      :help "timed calls per measurement (default 20; a measurement
also stops after 3 s once 3 calls are timed; FILE's products in their own
types take at least N calls and 0.1 s)")
               (threads "--threads N" :parse #'thread-count-parser
                        :default (threads)
                        :help "the \"all threads\" count (default: the --threads knob,
every core)")
               (json "--json [FILE]"
                     :help "also write the numbers as JSON to FILE, or to stdout (instead of
the table) without FILE or with - (null where not measured; bytes that are
not UTF-8 as \\udcHH)")
               (no-probe "--no-probe"
                         :help "skip the read-bandwidth probe (8x the last-level cache read
several times): report the figures the last probe cached, or n/a")
               (model "--model FILE"
                      :help "the encoder benchmark instead: MODEL:ENCODE on FILE's encoder
stored as F16, Q8_0 (:q8 and :q8x2) and F32, 16, 128 and 512 tokens, 1 and
2 threads, with llama.cpp's time on the same file as a ratio (RL_LLAMA_LIB
finds it; * marks noise) and each format's error against F32")
               (reference "--reference ORIG.gguf"
                          :help "with --model FILE (the encoder benchmark): the formats made from
ORIG.gguf (or the model directory), the model FILE was made from (the same
architecture, tensor names and shapes), their errors against it, and FILE as
stored a row of its own")
               (tokenizer "--tokenizer FILE"
                          :help "the tokenizer benchmark instead: FILE's tokenizer (a GGUF or a
tokenizer.json) on the lines of --text-file")
               (text-file "--text-file F"
                          :help "the texts of the tokenizer benchmark, one per line")
               (questions "--questions"
                          :help "the questions benchmark instead: model:decide over the built-in
questions on --model FILE (with a decision head) or --random NAME's model
with its head, per encoder format (F32, F16, Q8_0 :q8 and :q8x2, quantize
at load, outlier-aware Q8_0), 1 and 2 threads, against llama.cpp's encoder
on the same ids, each format's max |dp| against F32, and its questions per
second at 1 and 2 Lisp threads (one question per thread)")
               (breakdown "--breakdown"
                          :help "with --questions: also each format's µs per question by stage
(render, tokenize, each encoder layer, the head's attention and FFN, cls,
softmax) at 1 thread, the floor (the multiply-adds over one core's f32 FMA
and int8 peaks, measured in the same run) and the octets consed per
question")
               (svg "--svg FILE"
                    :help "with the encoder benchmark (--model, --tokens) or --questions: also
draw the times as an SVG picture in FILE (µs against tokens per format with
llama.cpp beside; µs per question per format, and with --breakdown by
stage)")
               (tokens "--tokens N" :parse (integer-parser :min 1 :max 100000)
                       :help "the encoder benchmark with one token count N (with --model,
or with --random NAME for a random model of that preset)")))
  (check-json-target json)
  (when (and svg (not (or questions model tokens)))
    (usage-error "--svg goes with the encoder benchmark (--model FILE, --tokens N) or --questions"))
  (when svg (check-svg-target svg))
  (when (and reference (or (not model) questions tokenizer text-file))
    (usage-error "--reference goes with --model FILE (the encoder benchmark)"))
  (when (or tokenizer text-file)
    (unless (and tokenizer text-file)
      (usage-error "the tokenizer benchmark takes --tokenizer FILE and --text-file F together"))
    (when (or file shapes random model tokens json)
      (usage-error "the tokenizer benchmark takes --tokenizer FILE, --text-file F and --iters N, nothing else"))
    (run-tokenizer-bench tokenizer text-file
                         :rounds (if (= iters *bench-default-iters*) 3 iters))
    (return-from command-bench 0))
  (when (and breakdown (not questions))
    (usage-error "--breakdown goes with --questions"))
  (when questions
    (when (or file shapes tokens (and model random))
      (usage-error "the questions benchmark takes --model FILE or --random NAME, --iters N and --json, nothing else"))
    (unless (or model (and random (not (string= random "shapes"))))
      (usage-error "--questions goes with --model FILE or --random s1-pico|s1-nano|s1-micro"))
    (run-question-bench :file model :random random
                        :reps (if (= iters *bench-default-iters*) 3 iters) :json json
                        :breakdown breakdown :svg svg)
    (return-from command-bench 0))
  (when (or model tokens)
    (when (or file shapes (and model random))
      (usage-error "the encoder benchmark takes --model FILE or --random NAME, nothing else"))
    (unless (or model (and random (not (string= random "shapes"))))
      (usage-error "--tokens goes with --model FILE or --random s1-pico|s1-nano|s1-micro"))
    (run-model-bench :file model :reference reference :random random
                     :token-counts (if tokens (list tokens) '(16 128 512)) :svg svg)
    (return-from command-bench 0))
  (when (> (count-if #'identity (list file random shapes)) 1)
    (usage-error "give at most one of FILE.gguf, --random NAME and --shape RxC"))
  (run-bench :file file :random random :shapes shapes :iters iters
             :threads threads :json json :probe (not no-probe))
  0)
