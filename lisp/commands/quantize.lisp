;;;; commands/quantize.lisp - `rontolisp quantize': its command line; the work
;;;; is in jobs/quantize-tool.lisp.

(in-package "COMMAND-LINE")

(define-command "quantize" (in out type &optional nthreads)
    (:usage "IN.gguf OUT.gguf TYPE [NTHREADS] [options]"
     :summary "quantize a GGUF file as llama-quantize does (same tensor types and bytes)"
     :details (lambda () (concatenate 'string "TYPE is one of llama-quantize's file types that need no importance matrix,
in any case, or its ftype number (the table below); others are refused by
name.  Tensors of two or more
dimensions whose name ends in `weight' (norms, token types and position
embeddings excepted) are quantized, each to the type llama-quantize's
per-tensor rules choose for TYPE (the K-quant mixtures give the output,
attention-value and feed-forward-down tensors more bits, by layer); rows
that do not split into a type's blocks fall back to a smaller block, or to
F16; the other tensors keep their type.  NTHREADS, as llama-quantize's,
is the thread count (0 or less: every core).  Tensors are read, converted
on the thread pool and written one piece at a time: memory holds a few
MiB, not the model.  On a terminal each tensor is reported as it is done;
the last line sums up sizes, bits per weight and time.  With
--calibration, the matrices the calibration file names get outlier-aware
scales (Q8_0 only).  Sizes print in the unit that fits (B, KiB, MiB, GiB).
The rules in full: doc/command-line.md, section 3.

" (string-right-trim '(#\Newline) (quantize-types-help))))
     :options ((calibration "--calibration CAL"
                            :help "a calibration file: max |x| per input channel of each
matrix, one F32 vector named after its tensor")
               (allow-requantize "--allow-requantize"
                                 :help "quantize tensors that are already
quantized (dequantized first, as llama-quantize
does); refused without it")
               (imatrix "--imatrix FILE"
                        :help "refused, saying why: quantize takes no importance
matrix (it writes what llama-quantize writes without one)")
               (leave-output-tensor "--leave-output-tensor"
                                    :help "leave output.weight in its type")
               (output-tensor-type "--output-tensor-type T"
                                   :help "the type of output.weight (f32, f16,
bf16, q8_0, q4_0 ... q6_k, iq4_nl, iq4_xs)")
               (token-embedding-type "--token-embedding-type T"
                                     :help "the type of the token embeddings")
               (tensor-types "--tensor-type PATTERN=T" :repeat t
                             :help "tensors whose name contains a match of the
regular expression PATTERN (lower-cased) become
T when TYPE is quantized; the first matching
rule wins; may be repeated")
               (override-kv "--override-kv KEY=TYPE:VALUE" :repeat t
                            :help "set the metadata KEY in the output (TYPE
int, float, bool or str, as llama-quantize: int
is written as u32, float as f32); the rules
read the new value; may be repeated")
               (pure "--pure" :help "no per-tensor mixture: every quantized
tensor gets TYPE's main type (fall backs aside)")
               (keep-split "--keep-split" :help "with the first shard of a llama-gguf-split set
as IN: one output shard per input shard, OUT minus .gguf then
-0000I-of-0000N.gguf (without it the shards make one file)")
               (dry-run "--dry-run" :help "print the plan (each tensor's types and sizes, one
line each) and the summary on stdout, write nothing")))
  (when imatrix
    (usage-error "--imatrix ~A: expected no importance matrix, found one: rontolisp quantize ~
writes what llama-quantize writes without one and does not weigh errors by activations (so the ~
types that need one are refused too); for Q8_0, --calibration gives outlier-aware scales" imatrix))
  (target-type-id type :ftype t)
  (when output-tensor-type (target-type-id output-tensor-type))
  (when token-embedding-type (target-type-id token-embedding-type))
  (let ((overrides (mapcar #'parse-kv-override override-kv))
        (threads (and nthreads
                      (let ((n (scan-integer nthreads)))
                        (unless n
                          (usage-error "expected a thread count NTHREADS (an integer) after TYPE, ~
found ~S" nthreads))
                        n))))
    (multiple-value-bind (written fallbacks summary)
        (quantize-file in out :type type :calibration calibration :pure pure
                              :output-tensor-type output-tensor-type
                              :token-embedding-type token-embedding-type
                              :tensor-types tensor-types :dry-run dry-run
                              :keep-split keep-split :allow-requantize allow-requantize
                              :leave-output-tensor leave-output-tensor
                              :override-kv overrides :threads threads)
      (declare (ignore written fallbacks))
      (write-string summary)
      0)))
