;;;; commands/export.lisp - `rontolisp export': its command line; the work
;;;; is in jobs/export.lisp.

(in-package "COMMAND-LINE")

(define-command "export" (&optional models-dir out-dir)
    (:usage "MODELS_DIR OUT_DIR [--type f16|q8_0] [--head-type TYPE] [--iters N]"
     :summary "convert, bench and list every model directory under MODELS_DIR"
     :details "Every subdirectory of MODELS_DIR that is a Laya or Hugging Face ModernBERT
directory (as `convert' takes them) becomes OUT_DIR/NAME.gguf.  Each file
is benched at one thread over the built-in questions (µs per question,
median of --iters rounds) beside an F32 conversion of the same directory
(max |dp| against it).  OUT_DIR/manifest.json lists per model its file,
bytes, parameters, tensor types and sha256; OUT_DIR/bench.json its figures
and the machine (layouts in doc/export.md; a missing figure is null).
Each model done prints its line of the table (bytes, µs per question,
max |dp|) on stdout.  A
model that fails (or a subdirectory that cannot be read) gets a line on
stderr and an error in the manifest, the others go on, and the command
exits 1.  A symbolic link to a directory is a model under the link's name.
A re-run replaces the results; export deletes only .gguf files it wrote."
     :options ((type "--type TYPE" :parse (choice-parser '("f16" "q8_0") :key #'type-keyword)
                     :default :f16 :help "the encoder matrices' type (default f16)")
               (head-type "--head-type TYPE" :parse (choice-parser *convert-types* :key #'type-keyword)
                          :default :f32 :help "the head's type (default f32)")
               (iters "--iters N" :parse (integer-parser :min 1 :max 1000) :default 3
                      :help "timing rounds per file; the median is reported (default 3)")))
  (unless (and models-dir out-dir)
    (usage-error "expected MODELS_DIR and OUT_DIR"))
  (if (plusp (export-models models-dir out-dir :type type :head-type head-type :reps iters))
      1
      0))
