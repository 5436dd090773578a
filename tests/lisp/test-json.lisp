;;;; test-json.lisp - the JSON reader: values, and the refusals it signals.

(in-package "RONTOLISP-TESTS")

(def-suite json :in all :description "The JSON reader.")
(in-suite json)

(test json-parse-values
  (let ((v (rontolisp:parse-json "{\"a\": [1, -2.5, true, false, null, \"\\u00e9\"], \"b\": {}}")))
    (is (hash-table-p v))
    (is (equalp #(1 -2.5d0 t nil :null "é") (gethash "a" v)))
    (is (hash-table-p (gethash "b" v))))
  (signals rontolisp:json-error (rontolisp:parse-json "{\"a\": }"))
  (signals rontolisp:json-error (rontolisp:parse-json "{\"a\": 1, \"a\": 2}"))
  (signals rontolisp:json-error (rontolisp:read-json-file "/nonexistent.json")))
