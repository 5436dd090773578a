;;;; commands/eval.lisp - `rontolisp eval': its command line; the work
;;;; is in jobs/eval.lisp.

(in-package "COMMAND-LINE")

(define-command "eval" (&optional file)
    (:usage "FILE.gguf [--reference ORIG.gguf] | --random s1-pico|s1-nano|s1-micro [--massive K [--massive-ratio R]] [--seed S] [--questions] [--sequences N] [--reps N] [--json]"
     :summary "how far F16, Q8_0, outlier-aware Q8_0 and quantize-at-load land from F32"
     :details "Runs the encoder of FILE.gguf (its matrices widened to F32: the reference)
or of a random encoder-only model as F32, an F16 file, a Q8_0 file, an
outlier-aware Q8_0 file (convert --outlier-aware) and the F32 file quantized
at load (model:load :quantize :q8_0), the Q8_0 ones with q8 and q8x2
activations, over the built-in calibration sequences.  Per way: the largest
max |error| and the least cosine against the F32 model's hidden states, mean
pooled and per token, and the microseconds per sequence (median of --reps
timings of the set, with the --threads knob).  The files are made in memory;
one calibration serves the outlier-aware file and quantize-at-load.  A
model with a decision head (FILE.gguf's, or --random with --questions) also
gets per way max |dp|: the largest probability difference from the F32
model's over the built-in questions, the head kept as the file holds it.
With --reference ORIG.gguf (the model FILE.gguf was made from: the same
architecture, tensor names and shapes, or an error naming the first
difference) the ways are made from ORIG.gguf's weights, each is measured
against ORIG.gguf widened to F32, and FILE.gguf as stored gets the first
row, \"file as stored\": what its type cost.  ORIG.gguf may also be the
model directory FILE.gguf was converted from (as convert reads it)."
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
               (questions "--questions"
                          :help "with --random: the model with its decision head, and max |dp| over
the built-in questions (a FILE.gguf with a head always gets it; one without
is an error)")
               (sequences "--sequences N" :parse (integer-parser :min 1)
                          :help "only the first N calibration sequences (default: all)")
               (reps "--reps N" :parse (integer-parser :min 1 :max 1000) :default 3
                     :help "timings per way; the median is reported (default 3)")
               (json "--json" :help "one JSON object instead of the table (bytes that are not UTF-8 as \\udcHH)")))
  (unless (and (or file random) (not (and file random)))
    (usage-error "expected FILE.gguf or --random NAME (one of them)"))
  (when (and reference (not file))
    (usage-error "--reference goes with FILE.gguf"))
  (when (and seed (not random))
    (usage-error "--seed goes with --random"))
  (check-massive-options random massive massive-ratio)
  (run-eval :file file :reference reference :random random :massive massive :massive-ratio (or massive-ratio 20)
            :seed (or seed 1) :sequences sequences :reps reps :questions questions :json json)
  0)
