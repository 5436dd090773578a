;;;; commands/edit.lisp - `rontolisp edit': its command line; the work
;;;; is in jobs/edit.lisp.

(in-package "COMMAND-LINE")

(define-command "edit" (in out)
    (:usage "IN.gguf OUT.gguf [--set KEY=VALUE[:TYPE]]... [--remove KEY]... [--rename-tensor OLD NEW]... [--set-chat-template FILE] [--dry-run]"
     :summary "copy a GGUF file with metadata set or removed and tensors renamed (tensor bytes unchanged)"
     :details "TYPE is one of u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string.  Without
it an existing key keeps its type; a new key gets bool for true/false, i32
for an integer, f32 for a number, else string (as gguf-py infers); a
number beyond its type's range (1e39 for f32) is refused.  Kept
keys stay in place, new keys go at the end.  Each change is printed as the
written file shows it, a long string or array cut to its start and its
length.  general.alignment cannot be removed (every file written has it)
and must be a u32 power of two.  The output is written under a
temporary name and renamed; IN and OUT may be the same file."
     :options ((sets "--set KEY=VALUE[:TYPE]" :repeat t :help "set KEY, adding it when new")
               (removes "--remove KEY" :repeat t :help "remove KEY")
               (renames "--rename-tensor OLD NEW" :repeat t :help "rename the tensor OLD to NEW")
               (template "--set-chat-template FILE"
                         :help "set tokenizer.chat_template to FILE's text (and drop the named templates)")
               (dry-run "--dry-run" :help "print the changes and write nothing")))
  (gguf:with-file (f in)
    (multiple-value-bind (metadata names changes)
        (plan-edit f (mapcar (lambda (arg) (edit-set-entry f arg)) sets)
                   removes renames (and template (read-template template)))
      (format t "~:[~;no change~%~]~{~A~%~}" (null changes) changes)
      (unless dry-run
        (gguf:write out (gguf:edit-file f metadata names)))))
  0)
