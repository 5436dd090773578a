;;;; commands/quantize.lisp - `rontolisp quantize': its command line; the work
;;;; is in tools/quantize-tool.lisp.

(in-package "RONTOLISP")

(define-command "quantize" (in out type)
    (:usage "IN.gguf OUT.gguf TYPE [options]"
     :summary "quantize a GGUF file as llama-quantize does (same tensor types and bytes)"
     :details "TYPE is q8_0, f16, bf16 or f32 (any case), or llama-quantize's ftype 7, 1,
32 or 0; other types are refused by name.  Tensors of two or more dimensions
whose name ends in `weight' (norms, token types and position embeddings
excepted) become TYPE -- for Q8_0, F16 when their rows are not a multiple
of 32; the others keep their type.  Tensors are read, converted on the
thread pool and written one piece at a time: memory holds a few MiB, not
the model.  On a terminal each tensor is reported as it is done; the last
line sums up sizes, bits per weight and time.  With --calibration, the
matrices the calibration file names get outlier-aware scales (still Q8_0)."
     :options ((calibration "--calibration CAL"
                            :help "a calibration file: max |x| per input channel of each
matrix, one F32 vector named after its tensor")
               (output-tensor-type "--output-tensor-type T"
                                   :help "the type of output.weight (f32, f16, bf16, q8_0)")
               (token-embedding-type "--token-embedding-type T"
                                     :help "the type of the token embeddings")
               (tensor-types "--tensor-type PATTERN=T" :repeat t
                             :help "tensors whose name contains a match of the
regular expression PATTERN (lower-cased) become T when TYPE is q8_0; the
first matching rule wins; may be repeated")
               (pure "--pure" :help "accepted as llama-quantize takes it (no k-quant
mixtures); changes nothing for these types")
               (keep-split "--keep-split" :help "with the first shard of a llama-gguf-split set
as IN: one output shard per input shard, OUT minus .gguf then
-0000I-of-0000N.gguf (without it the shards make one file)")
               (dry-run "--dry-run" :help "print the plan (each tensor's types and sizes, one
line each) and the summary on stdout, write nothing")))
  (target-type-id type :ftype t)
  (when output-tensor-type (target-type-id output-tensor-type))
  (when token-embedding-type (target-type-id token-embedding-type))
  (multiple-value-bind (written fallbacks summary)
      (quantize-file in out :type type :calibration calibration :pure pure
                            :output-tensor-type output-tensor-type
                            :token-embedding-type token-embedding-type
                            :tensor-types tensor-types :dry-run dry-run
                            :keep-split keep-split)
    (declare (ignore written fallbacks))
    (write-string summary)
    0))
