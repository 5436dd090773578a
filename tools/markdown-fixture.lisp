;;;; markdown-fixture.lisp - write the fixture of the `inspect --markdown'
;;;; golden test (tests/lisp/test-inspect.lisp's MARKDOWN-FIXTURE) to the
;;;; path given.  Run by tools/make-markdown-golden.sh from the repository
;;;; root:  build/rontolisp script tools/markdown-fixture.lisp OUT.gguf

(require 'asdf)
(push (truename "./") asdf:*central-registry*)
(let ((*standard-output* (make-broadcast-stream))
      (*error-output* (make-broadcast-stream)))
  (asdf:load-system "fiveam")
  (asdf:load-system "yason")
  (asdf:load-system "rontolisp-tests"))
(funcall (find-symbol "WRITE-MARKDOWN-FIXTURE" "RONTOLISP-TESTS") (first rontolisp:*args*))
