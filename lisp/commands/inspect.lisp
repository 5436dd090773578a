;;;; commands/inspect.lisp - `rontolisp inspect': its command line; the work
;;;; is in jobs/inspect.lisp.

(in-package "COMMAND-LINE")

(define-command "inspect" (file)
    (:usage "FILE.gguf [--max-array N] [--max-string N] [--json | --markdown] [--no-tensors | --tensors-only] [--filter REGEX]"
     :summary "print a GGUF file's header, metadata and tensors (--json: as one JSON object)"
     :details "The text form ends with a total and a line per tensor type with its bits
per weight; general.file_type is followed by its llama.cpp name, e.g.
7 (MOSTLY_Q8_0).  --markdown writes what gguf-py's gguf_dump --markdown
writes.  REGEX is searched anywhere in each key and tensor name (as
Python's re.search): . * + ? {m,n} [] [^] ^ $ | ( ) (?: ) and \\d \\w \\s
\\D \\W \\S \\n \\t, a backslash before punctuation for itself.  Control
characters in keys, strings and tensor names are escaped in every form (\\n,
\\u001b, \\u202e ...); a byte that is not UTF-8 is \\xHH in the text and
Markdown, and in JSON the lone surrogate escape \\udcHH, which strict JSON
parsers accept and Python's surrogateescape turns back into the byte."
     :options ((max-array "--max-array N" :parse (integer-parser :min 0)
                          :help "show at most N elements of each array value (the text
form shows 16 unless told; --json shows all)")
               (max-string "--max-string N" :parse (integer-parser :min 0)
                           :help "cut strings longer than N characters in the text form
to their first N-3 and ... (default 60, as gguf_dump; 0: whole; --json shows all)")
               (json "--json" :help "write one JSON object instead of the text (bytes that
are not UTF-8 as \\udcHH)")
               (markdown "--markdown" :help "write gguf_dump --markdown's Markdown instead of the text")
               (no-tensors "--no-tensors" :help "show the metadata only")
               (tensors-only "--tensors-only" :help "show the tensors only")
               (filter "--filter REGEX" :parse #'regex-parser
                       :help "show only the keys and tensors whose name REGEX matches")))
  (when (and json markdown)
    (usage-error "expected --json or --markdown, found both"))
  (when (and no-tensors tensors-only)
    (usage-error "expected --no-tensors or --tensors-only, found both"))
  (gguf:with-file (f file)
    (let ((view (file-view f :filter filter :no-tensors no-tensors :tensors-only tensors-only)))
      (cond (json
             (write-json (inspection-json f max-array view) *standard-output* :indent 1)
             (terpri))
            (markdown
             (print-markdown f file view *standard-output*))
            (t
             (print-inspection f *standard-output* (or max-array *default-text-max-array*) view
                               (or max-string *default-text-max-string*))))))
  0)
