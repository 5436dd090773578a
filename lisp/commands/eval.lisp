;;;; commands/eval.lisp - `rontolisp eval': its command line; the work
;;;; is in jobs/eval.lisp.

(in-package "COMMAND-LINE")

(define-command "eval" (&optional file)
    (:usage "FILE.gguf [--reference ORIG.gguf] | --random s1-pico|s1-nano|s1-micro [--massive K [--massive-ratio R]] [--seed S] [--questions [QUESTIONS.jsonl]] [--quants TYPES] [--sequences N] [--reps N] [--json] [--svg FILE]"
     :summary "how far F16, Q8_0, outlier-aware Q8_0, quantize-at-load and (--quants) quantize's file types land from F32"
     :details "Runs the encoder of FILE.gguf (its matrices widened to F32: the reference)
or of a random encoder-only model as F32, an F16 file, a Q8_0 file, an
outlier-aware Q8_0 file (convert --outlier-aware) and the F32 and the F16
files quantized at load (model:load :quantize :q8_0), the Q8_0 ones with q8 and q8x2
activations, over the built-in calibration sequences.  Per way: the largest
max |error| and the least cosine against the F32 model's hidden states, mean
pooled and per token, and the microseconds per sequence (median of --reps
timings of the set, with the --threads knob).  The files are made in memory;
one calibration serves the outlier-aware file and quantize-at-load.  A
model with a decision head (FILE.gguf's, or --random with --questions) also
gets per way, over the built-in questions or those of --questions
QUESTIONS.jsonl (decide's form), against the F32 model's decisions: max
|dp|, the largest probability difference; other, the share of questions
whose winning option differs; and, when questions carry \"answer\" (the
right option's index), right, the share answered right.  The head is kept
as the file holds it; with a head the F16 file gets a second row whose head's
matrices are F16 too (convert --head-type f16).  --quants TYPES (quantize's
file types, comma-separated, or all: Q4_0 ... IQ4_XS) adds a row per type,
the file quantize writes of it from the F32 file, with q8x2 activations;
each is made in a temporary file and removed.  A line of QUESTIONS.jsonl that is not a question, an
\"answer\" that is not an option's index, or a question the model cannot
answer is an error naming the line.
With --reference ORIG.gguf (the model FILE.gguf was made from: the same
architecture, tensor names and shapes, or an error naming the first
difference) the ways are made from ORIG.gguf's weights, each is measured
against ORIG.gguf widened to F32, and FILE.gguf as stored gets the first
row, \"file as stored\": what its type cost.  ORIG.gguf may also be the
model directory FILE.gguf was converted from (as convert reads it).  With
--svg FILE each way's error after each encoder layer is drawn as well, a
self-contained SVG picture."
     :options ((reference "--reference ORIG.gguf"
                          :help "measure against ORIG.gguf (or the Laya or Hugging Face model
directory), the model FILE.gguf was made from, and give FILE.gguf as stored
a row of its own")
               (random "--random NAME" :parse (choice-parser (mapcar #'first *presets*))
                       :help "a random encoder of that preset instead of FILE.gguf")
               (massive "--massive K" :parse (integer-parser :min 0) :default 0
                        :help "with --random: K massive residual channels (as convert)")
               (massive-ratio "--massive-ratio R" :parse (integer-parser :min 1)
                              :help "with --massive: how many times larger (default 20)")
               (seed "--seed S" :parse (integer-parser)
                     :help "with --random: the weights' seed (default 1)")
               (questions "--questions [QUESTIONS.jsonl]"
                          :help "the decisions over the questions of QUESTIONS.jsonl (default: the
built-in ones); with --random: the model with its decision head (a FILE.gguf
with a head is always measured; one without is an error)")
               (quants "--quants TYPES"
                       :help "also the files quantize writes of these file types (comma-separated,
as quantize names them: Q4_0,Q4_K_M,IQ4_XS ...; all: every quantized type
but Q8_0), one row each")
               (sequences "--sequences N" :parse (integer-parser :min 1)
                          :help "only the first N calibration sequences (default: all)")
               (reps "--reps N" :parse (integer-parser :min 1 :max 1000) :default 3
                     :help "timings per way; the median is reported (default 3)")
               (json "--json" :help "one JSON object instead of the table (bytes that are not UTF-8 as \\udcHH)")
               (svg "--svg FILE" :help "also draw each way's max |error| after each encoder layer against
F32 as an SVG picture in FILE (the sequences run once more, layer by layer)")))
  (unless (and (or file random) (not (and file random)))
    (usage-error "expected FILE.gguf or --random NAME (one of them)"))
  (when (and reference (not file))
    (usage-error "--reference goes with FILE.gguf"))
  (when (and seed (not random))
    (usage-error "--seed goes with --random"))
  (check-massive-options random massive massive-ratio)
  (when svg (check-svg-target svg))
  (run-eval :file file :reference reference :random random :massive massive
            :massive-ratio (or massive-ratio 20) :quants (and quants (eval-quant-types quants))
            :seed (or seed 1) :sequences sequences :reps reps :questions questions :json json
            :svg svg)
  0)
