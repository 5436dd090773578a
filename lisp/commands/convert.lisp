;;;; commands/convert.lisp - `rontolisp convert': its command line; the work
;;;; is in jobs/convert.lisp.

(in-package "COMMAND-LINE")

(define-command "convert" (&optional source out)
    (:usage "<model_dir | --random s1-pico|s1-nano|s1-micro> OUT.gguf [--type f32|f16|bf16|q8_0] [--head-type f32|f16|bf16|q8_0] [--encoder-only] [--pre NAME] [--name NAME] [--seed N] [--massive K [--massive-ratio R]] [--outlier-aware] [--write-laya DIR]"
     :summary "convert a Laya or Hugging Face ModernBERT directory (or a random model) to GGUF"
     :details "model_dir: a Laya directory (encoder/config.json, rl_agent_config.json, ...)
or a Hugging Face ModernBERT directory (config.json, model.safetensors or
shards, tokenizer.json).  Type policy: 1-D tensors F32; the head --head-type;
encoder matrices --type, except that with q8_0 the token embeddings stay
F16; a row that is not a multiple of 32 falls back to F16.  With --type q8_0
--outlier-aware, the model is calibrated first (its F32 encoder run over
built-in token sequences, as `rontolisp calibrate' does) and each encoder
matrix's blocks holding an outlier input channel get the scale that keeps
those weights best: still plain Q8_0, which llama.cpp reads."
     :options ((random "--random NAME" :parse (choice-parser (mapcar #'first *presets*))
                       :help "a model of that preset shape with random weights and a
small test tokenizer, instead of a model directory")
               (type "--type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                     :default :f16 :help "the encoder matrices' type (default f16)")
               (head-type "--head-type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                          :default :f32 :help "the head's type (default f32)")
               (encoder-only "--encoder-only"
                             :help "leave the head out: a plain ModernBERT encoder, the
file llama.cpp loads")
               (pre "--pre NAME" :default "modern-bert"
                    :help "tokenizer.ggml.pre (default modern-bert)")
               (name "--name NAME" :help "general.name (default: config.json's name, or the
Hugging Face directory's)")
               (seed "--seed N" :parse (integer-parser) :default 1
                     :help "the random weights' seed (default 1)")
               (massive "--massive K" :parse (integer-parser :min 0) :default 0
                        :help "with --random: K residual channels larger than the rest
(token embedding and norm weights), as trained encoders have")
               (massive-ratio "--massive-ratio R" :parse (integer-parser :min 1)
                              :help "with --massive: how many times larger (default 20)")
               (outlier-aware "--outlier-aware"
                              :help "with --type q8_0: calibrate the model and choose
outlier-aware Q8_0 scales for the encoder matrices")
               (laya-dir "--write-laya DIR"
                         :help "with --random: also write the model as a Laya directory
DIR, and convert from it")))
  (when (and random source (null out))
    (setf out source source nil))
  (unless (and out (or source random) (not (and source random)))
    (usage-error "expected a model directory or --random NAME, and OUT.gguf"))
  (when (and laya-dir (not random))
    (usage-error "--write-laya goes with --random"))
  (check-massive-options random massive massive-ratio)
  (when (and outlier-aware (not (eq type :q8_0)))
    (usage-error "--outlier-aware goes with --type q8_0, found --type ~(~A~)" type))
  (let* ((options (list :type type :head-type head-type :pre pre :name name
                        :encoder-only encoder-only :outlier-aware outlier-aware))
         (n (cond (laya-dir
                   (write-random-laya laya-dir random :seed seed :massive massive
                                                      :massive-ratio (or massive-ratio 20))
                   (apply #'convert-laya laya-dir out options))
                  (random (apply #'convert-random random out :seed seed :massive massive
                                                  :massive-ratio (or massive-ratio 20) options))
                  (t (apply #'convert-directory source out options)))))
    (format t "~A: ~D tensors (encoder ~(~A~)~:[~;, outlier-aware~], ~A)~%" out n type
            outlier-aware (written-head-description out head-type))
    0))
