;;;; test-threads.lisp - the limit on live Lisp threads (lisp/base/threads.lisp):
;;;; more threads than ECL's first vector of 256 start and end (ECL alone
;;;; spins forever at the 256th), and one beyond *THREAD-LIMIT* is refused
;;;; with THREAD-LIMIT-ERROR; a special variable has its slot in the
;;;; threads' tables of bindings before any thread can bind it.

(in-package "RONTOLISP-TESTS")

(def-suite threads :in all :description "The limit on live Lisp threads.")
(in-suite threads)

(test threads-beyond-256-start-and-end
  ;; In a child with a deadline: ECL alone never returns from the 256th.
  (let ((script (write-file-string (tmp-path "threads.lisp") "
(let* ((gate (mp:make-semaphore :count 0))
       (threads (loop repeat 300
                      collect (mp:process-run-function \"waiter\"
                                                       (lambda () (mp:wait-on-semaphore gate) 1)))))
  (format t \"started ~D~%\" (length threads))
  (mp:signal-semaphore gate 300)
  (format t \"joined ~D~%\" (count 1 (mapcar #'mp:process-join threads))))
")))
    (unwind-protect
         (multiple-value-bind (code out err) (sh "timeout -s KILL 120 \"$0\" script \"$1\"" script)
           (is (eql 0 code) "exit ~S: ~A" code err)
           (is (contains out "started 300"))
           (is (contains out "joined 300")))
      (ignore-errors (delete-file script)))))

(test threads-beyond-the-limit-are-refused
  (let* ((gate (mp:make-semaphore :count 0))
         (live (length (mp:all-processes)))
         (threads '())
         (refused nil))
    (let ((rontolisp:*thread-limit* (+ live 2)))
      (unwind-protect
           (progn
             (dotimes (i 2)
               (push (mp:process-run-function "waiter" (lambda () (mp:wait-on-semaphore gate)))
                     threads))
             (setf refused
                   (handler-case (mp:process-run-function "one too many" (lambda () nil))
                     (rontolisp:thread-limit-error (e) e)))
             ;; MP:MAKE-PROCESS then MP:PROCESS-ENABLE is refused the same way.
             (is (typep (handler-case (let ((p (mp:make-process :name "enabled")))
                                          (mp:process-preset p (lambda () nil))
                                          (mp:process-enable p))
                          (rontolisp:thread-limit-error (e) e))
                        'rontolisp:thread-limit-error)))
        (mp:signal-semaphore gate 2)
        (mapc #'mp:process-join threads)))
    (is (typep refused 'rontolisp:thread-limit-error) "answered ~S" refused)
    (when (typep refused 'rontolisp:thread-limit-error)
      (is (eql (+ live 2) (rontolisp:thread-limit-error-limit refused)))
      (is (contains (princ-to-string refused) "\"one too many\"")))
    ;; Within the limit again once they ended.
    (is (eql 7 (mp:process-join (mp:process-run-function "after" (lambda () 7)))))))

;;; Special variables and ECL's per-thread slots of bindings.

(defun fresh-special-package (count)
  "A new package of COUNT special variables (*V0* ...), each bound
globally to :GLOBAL and never bound by any thread; its name is unique."
  (let ((package (make-package (symbol-name (gensym "SPECIALS-")) :use '())))
    (dotimes (i count package)
      (let ((s (intern (format nil "*V~D*" i) package)))
        (proclaim `(special ,s))
        (setf (symbol-value s) :global)))))

(test threads-start-with-every-special-slotted
  "A thread starts only once every special variable has its slot in the
threads' tables of bindings: ECL hands a slot out on a variable's first
binding without a lock, and two threads binding a fresh variable at once
could each take one, the loser reading the global value inside its own
LET (a question rendered with no variables, its option markers lost)."
  (let* ((package (fresh-special-package 3))
         (vars (let ((l '())) (do-symbols (s package l) (push s l)))))
    (unwind-protect
         (progn
           (is (notany #'rontolisp::%special-slot-p vars))
           (is (eql 7 (mp:process-join (mp:process-run-function "slots" (lambda () 7)))))
           (is (every #'rontolisp::%special-slot-p vars)
               "~{~S~^, ~} had no slot when the thread started"
               (remove-if #'rontolisp::%special-slot-p vars))
           ;; and each thread then reads its own binding
           (let ((seen (mapcar #'mp:process-join
                               (loop for k below 4
                                     collect (let ((k k))
                                               (mp:process-run-function
                                                "bind"
                                                (lambda ()
                                                  (progv vars (make-list (length vars)
                                                                         :initial-element k)
                                                    (mapcar #'symbol-value vars)))))))))
             (is (equal (loop for k below 4 collect (make-list (length vars) :initial-element k))
                        seen))))
      (delete-package package))))

(test special-slot-p-refuses-what-is-not-a-variable
  (is (eq t (rontolisp::%special-slot-p '*print-base*)))
  (signals rontolisp:rontolisp-error (rontolisp::%special-slot-p 'pi))
  (signals rontolisp:rontolisp-error (rontolisp::%special-slot-p "*PRINT-BASE*")))

;;; MAP-IN-ORDER: work on several threads, results in order.

(defun wait-on-gate (gate seconds)
  "True once GATE (a semaphore) could be taken, NIL after SECONDS without."
  (let ((deadline (+ (get-internal-real-time) (* seconds internal-time-units-per-second))))
    (loop (when (mp:try-get-semaphore gate) (return t))
          (when (> (get-internal-real-time) deadline) (return nil))
          (sleep 0.001))))

(test map-in-order-emits-in-submission-order
  "Item 0 finishes only after item 1 has (it waits for a gate item 1's
work opens): item 1 is still emitted after item 0, and every item once."
  ;; No IS in the workers: FiveAM's test is not bound on other threads.
  (let* ((gate (mp:make-semaphore :count 0))
         (finished '()) (emitted '()) (lock (mp:make-lock :name "test")) (waited :never)
         (n (command-line::map-in-order
             2 (lambda (submit) (dotimes (i 10) (funcall submit i)))
             (lambda (i)
               (when (= i 0)
                 (setf waited (wait-on-gate gate 60)))
               (mp:with-lock (lock) (push i finished))
               (when (= i 1)
                 (mp:signal-semaphore gate))
               (* i i))
             (lambda (i result) (push (cons i result) emitted)))))
    (is (eq t waited) "item 1 never ran beside item 0")
    (is (= 10 n))
    (is (equal (loop for i below 10 collect (cons i (* i i))) (reverse emitted)))
    (is (< (position 1 (reverse finished)) (position 0 (reverse finished))) "~S" finished)))

(test map-in-order-counts-the-caller-among-its-threads
  "THREADS 2 starts one thread and the caller works too: two items run at
once (item 0 waits for item 1), and no more than one other thread ever
works beside the caller."
  (let* ((gate (mp:make-semaphore :count 0)) (lock (mp:make-lock :name "test"))
         (waited :never) (workers '())
         (n (command-line::map-in-order
             2 (lambda (submit) (dotimes (i 40) (funcall submit i)))
             (lambda (i)
               (when (= i 0)
                 (setf waited (wait-on-gate gate 60)))
               (when (= i 1)
                 (mp:signal-semaphore gate))
               (mp:with-lock (lock) (pushnew mp:*current-process* workers))
               i)
             (lambda (i result) (declare (ignore i result))))))
    (is (= 40 n))
    (is (eq t waited) "item 1 never ran beside item 0")
    (is (= 2 (length workers)) "~D threads worked, expected 2" (length workers))
    (is (member mp:*current-process* workers) "the caller worked on no item")))

(test map-in-order-stops-at-a-failing-item
  "An error in one item's work is signalled in the caller; nothing after
that item is emitted, everything before it is."
  (dolist (threads '(1 2))
    (let* ((emitted '())
           (caught (handler-case
                       (command-line::map-in-order
                        threads (lambda (submit) (dotimes (i 20) (funcall submit i)))
                        (lambda (i) (if (= i 5) (error "item ~D failed" i) i))
                        (lambda (i result) (declare (ignore result)) (push i emitted)))
                     (error (c) (princ-to-string c)))))
      (is (equal "item 5 failed" caught) "~D threads: ~S" threads caught)
      (is (equal '(0 1 2 3 4) (reverse emitted)) "~D threads: ~S" threads emitted))))

(test map-in-order-holds-items-within-its-budget
  "With WEIGHT and BUDGET, the items submitted and not yet emitted never
weigh more than BUDGET, but an item heavier than BUDGET still goes (alone),
and every item is emitted once, in order: `decide --threads N' holds at
most N longest lines at once however wide its window.  The other thread's
items wait until the caller works on one, which it does only once no item
fits (without the budget, once all are submitted)."
  (let* ((caller mp:*current-process*) (lock (mp:make-lock :name "test"))
         (gate (mp:make-semaphore :count 0)) (opened nil)
         (held 0) (most 0) (emitted '())
         (weights #(10 10 10 30 10 0 10 10 10 10 10 10 10 10 10 10))
         (n (command-line::map-in-order
             2
             (lambda (submit)
               (dotimes (i (length weights))
                 (funcall submit i)
                 ;; SUBMIT answers once item I is in the window
                 (mp:with-lock (lock)
                   (incf held (aref weights i))
                   ;; the heavy item alone is allowed
                   (setf most (max most (if (= i 3) (- held 30) held))))))
             (lambda (i)
               (if (eq mp:*current-process* caller)
                   (mp:with-lock (lock)
                     (unless opened
                       (setf opened t)
                       (mp:signal-semaphore gate 1000)))
                   (unless opened (wait-on-gate gate 60)))
               i)
             (lambda (i result)
               (mp:with-lock (lock) (decf held (aref weights i)))
               (push result emitted))
             :weight (lambda (i) (aref weights i)) :budget 25)))
    (is (= (length weights) n))
    (is (<= most 25) "~D held at once, budget 25" most)
    (is (equal (loop for i below (length weights) collect i) (reverse emitted))
        "~S" (reverse emitted))))

(test map-in-order-fills-its-window-before-the-caller-works
  "The caller submits a window's worth of items before it works on one
itself, so that a worker that finishes an item finds the next waiting
rather than sleeping until the caller's item is done: the first item the
caller works on comes once WINDOW items are submitted (the worker's items
wait until the caller has worked on one, so the worker cannot drain the
queue meanwhile).  Every item is still worked on once and emitted in
order."
  (let* ((caller mp:*current-process*) (lock (mp:make-lock :name "test"))
         (gate (mp:make-semaphore :count 0)) (opened nil)
         (submitted 0) (submitted-at-first :never) (worked '()) (emitted '())
         (n (command-line::map-in-order
             2 (lambda (submit) (dotimes (i 30) (incf submitted) (funcall submit i)))
             (lambda (i)
               (if (eq mp:*current-process* caller)
                   (mp:with-lock (lock)
                     (when (eq submitted-at-first :never)
                       (setf submitted-at-first submitted)
                       (setf opened t)
                       (mp:signal-semaphore gate 1000)))
                   (unless opened (wait-on-gate gate 60)))
               (mp:with-lock (lock) (push i worked))
               (- i))
             (lambda (i result) (push (cons i result) emitted))
             :window 6)))
    (is (= 30 n))
    (is (eql 7 submitted-at-first)
        "the caller first worked when ~S items were submitted, expected 7 (a window of 6, ~
then the one that found it full)" submitted-at-first)
    (is (equal (loop for i below 30 collect i) (sort (copy-list worked) #'<)))
    (is (equal (loop for i below 30 collect (cons i (- i))) (reverse emitted)))))

(defun map-in-order-other-threads (threads)
  "The threads other than the caller's that worked in a MAP-IN-ORDER run of
THREADS threads, over a window of THREADS items (the first item of each
thread waits until every thread has one, so that all of them work)."
  (let* ((caller mp:*current-process*) (lock (mp:make-lock :name "test"))
         (gate (mp:make-semaphore :count 0)) (seen '()))
    (command-line::map-in-order
     threads (lambda (submit) (dotimes (i (* 4 threads)) (funcall submit i)))
     (lambda (i)
       (declare (ignore i))
       (let ((first nil))
         (mp:with-lock (lock)
           (unless (member mp:*current-process* seen)
             (push mp:*current-process* seen)
             (setf first t)
             (when (= (length seen) threads)
               (mp:signal-semaphore gate 1000))))
         (when first (wait-on-gate gate 60))))
     (lambda (i result) (declare (ignore i result)))
     :window threads)
    (remove caller seen)))

(test map-in-order-keeps-its-threads-for-the-next-run
  "Starting an ECL thread takes a millisecond and more and conses its
stacks: a second run works on the threads of the first (the spare threads'
pool), and a run on more threads adds only the ones it lacks."
  (let* ((first (map-in-order-other-threads 2))
         (second (map-in-order-other-threads 2))
         (third (map-in-order-other-threads 3)))
    (is (= 1 (length first)) "~D other threads worked, expected 1" (length first))
    (is (equal first second) "the second run worked on a new thread")
    (is (= 2 (length third)))
    (is (subsetp first third) "the run on 3 threads did not reuse the pool's thread")))

(test spare-threads-give-new-specials-their-slots
  "A spare thread handed out again gives every special variable defined
since it started its slot first, as a new thread would (see
THREADS-START-WITH-EVERY-SPECIAL-SLOTTED)."
  (map-in-order-other-threads 2)        ; a spare thread in the pool
  (let* ((package (fresh-special-package 3))
         (vars (let ((l '())) (do-symbols (s package l) (push s l)))))
    (unwind-protect
         (progn
           (is (notany #'rontolisp::%special-slot-p vars))
           (let ((reused (map-in-order-other-threads 2)))
             (is (= 1 (length reused))))
           (is (every #'rontolisp::%special-slot-p vars)
               "~{~S~^, ~} had no slot when the spare thread took its job"
               (remove-if #'rontolisp::%special-slot-p vars)))
      (delete-package package))))

(test new-spare-threads-start-with-every-special-slotted
  "A spare thread started anew (the pool empty) gives every special
variable its slot before it starts, as any thread start does: map-in-order's
first worker used to start without, and a question it rendered lost its
template variables (the first binding race of
THREADS-START-WITH-EVERY-SPECIAL-SLOTTED)."
  ;; the pool's idle threads set aside, so that a thread is started
  (let ((kept (mp:with-lock (rontolisp::*spare-threads-lock*)
                (shiftf rontolisp::*spare-threads* '()))))
    (unwind-protect
         (let* ((package (fresh-special-package 3))
                (vars (let ((l '())) (do-symbols (s package l) (push s l)))))
           (unwind-protect
                (progn
                  (is (notany #'rontolisp::%special-slot-p vars))
                  (let ((spare (rontolisp:start-spare-thread "test spare" (lambda () 1))))
                    (rontolisp:join-spare-thread spare)
                    (is (not (member spare kept))))
                  (is (every #'rontolisp::%special-slot-p vars)
                      "~{~S~^, ~} had no slot when the new spare thread started"
                      (remove-if #'rontolisp::%special-slot-p vars)))
             (delete-package package)))
      (mp:with-lock (rontolisp::*spare-threads-lock*)
        (setf rontolisp::*spare-threads* (append kept rontolisp::*spare-threads*))))))

(test spare-thread-reports-its-jobs-failure-and-stays
  "A serious condition that ends a spare thread's job is answered by
JOIN-SPARE-THREAD, and the thread goes back to the pool for the next job."
  (let* ((spare (rontolisp:start-spare-thread "test spare" (lambda () (error "job failed"))))
         (failure (rontolisp:join-spare-thread spare)))
    (is (typep failure 'error))
    (is (equal "job failed" (princ-to-string failure)))
    (let ((again (rontolisp:start-spare-thread "test spare" (lambda () 7))))
      (is (null (rontolisp:join-spare-thread again)))
      (is (eq (rontolisp::spare-thread-process spare) (rontolisp::spare-thread-process again))
          "the failed job's thread was not reused"))))
