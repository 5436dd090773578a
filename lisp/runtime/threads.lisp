;;;; threads.lisp - a limit on live Lisp threads.  ECL 21.2.1 lists its
;;;; threads in a vector of 256 slots that it cannot grow (the grown copy
;;;; has no fill pointer, so it is grown again forever: the 256th thread
;;;; spins at 100% CPU until memory runs out).  MP:PROCESS-RUN-FUNCTION and
;;;; MP:PROCESS-ENABLE are wrapped here: before a thread starts, the vector
;;;; is made large enough once (%RESERVE-THREAD-SLOTS, prims/ecl/threads.c)
;;;; and a thread beyond *THREAD-LIMIT* is refused with THREAD-LIMIT-ERROR.
;;;; Swank's threads (lisp/runtime/swank.lisp) are made the same way.

(in-package "RONTOLISP")

(defparameter *thread-limit* 1000
  "The most Lisp threads alive at once (the main thread included): starting
one more signals THREAD-LIMIT-ERROR.")

(defconstant +thread-slack+ 64
  "Slots of ECL's thread vector kept beyond *THREAD-LIMIT*, for threads
started by code that calls ECL's C functions without the wrappers below.")

(defvar *thread-lock* (mp:make-lock :name "rontolisp thread limit" :recursive t)
  "Held from the count of live threads to the start of the new one, so two
threads starting at once cannot both take the last place.")

(defvar *original-process-enable* #'mp:process-enable
  "ECL's own MP:PROCESS-ENABLE (kept once, before it is wrapped).")

(defvar *original-process-run-function* #'mp:process-run-function
  "ECL's own MP:PROCESS-RUN-FUNCTION (kept once, before it is wrapped).")

(defun call-with-thread-room (name start)
  "Call START (which starts one thread named NAME and answers its process)
when fewer than *THREAD-LIMIT* Lisp threads are alive, else signal
THREAD-LIMIT-ERROR; also when START answers NIL (the system refused the
thread)."
  (mp:with-lock (*thread-lock*)
    (%reserve-thread-slots (+ *thread-limit* +thread-slack+))
    (let ((live (length (mp:all-processes))))
      (when (>= live *thread-limit*)
        (thread-limit-error *thread-limit* "expected fewer than ~D live Lisp threads ~
(*THREAD-LIMIT*) to start thread ~S, found ~D" *thread-limit* name live)))
    (or (funcall start)
        (thread-limit-error *thread-limit* "expected the system to start thread ~S, found it ~
refused (memory or a process limit)" name))))

(defun guarded-process-enable (process)
  "MP:PROCESS-ENABLE within the thread limit (CALL-WITH-THREAD-ROOM)."
  (call-with-thread-room (mp:process-name process)
                         (lambda () (funcall *original-process-enable* process))))

(defun guarded-process-run-function (name function &rest arguments)
  "MP:PROCESS-RUN-FUNCTION within the thread limit (CALL-WITH-THREAD-ROOM)."
  (call-with-thread-room (if (consp name) (getf name :name) name)
                         (lambda () (apply *original-process-run-function* name function arguments))))

(setf (fdefinition 'mp:process-enable) #'guarded-process-enable
      (fdefinition 'mp:process-run-function) #'guarded-process-run-function)

;;; Work on several threads, results in order.  MAP-IN-ORDER hands the
;;; items a feeder submits to worker threads and gives each result to an
;;; emitter in the order the items came, as soon as that item and every
;;; one before it are done: `decide --threads N' answers a questions file
;;; (or a pipe, line by line) this way, and `bench --questions' times it.

(defstruct (ordered-run (:constructor make-ordered-run (work emit window)))
  "The state MAP-IN-ORDER's threads share, under LOCK: the items submitted
and not yet taken (QUEUE, a list of (index . item), and its last cons
TAIL), the count SUBMITTED, NEXT (the index of the next item to emit), the
finished items not yet emitted (DONE, index -> (item . result)), CLOSED
once the feeder has submitted its last item, and FAILURE, the condition
that stopped the run (or :ABANDONED when the caller unwound)."
  work emit window
  (lock (mp:make-lock :name "ordered run"))
  (changed (mp:make-condition-variable))
  (queue '()) (tail '()) (submitted 0) (next 0)
  (done (make-hash-table)) (closed nil) (failure nil))

(defun emit-ready (run)
  "Emit (under RUN's lock) every finished item whose predecessors are all
emitted."
  (loop for index = (ordered-run-next run)
        for entry = (gethash index (ordered-run-done run))
        while entry
        do (remhash index (ordered-run-done run))
           (setf (ordered-run-next run) (1+ index))
           (funcall (ordered-run-emit run) (car entry) (cdr entry))))

(defun ordered-worker (run)
  "A worker of MAP-IN-ORDER: take the oldest submitted item, compute its
result, record it and emit what is ready, until the feeder has closed the
run and the queue is empty, or the run failed.  A serious condition in the
work or the emitter becomes the run's failure."
  (let ((lock (ordered-run-lock run)) (changed (ordered-run-changed run)))
    (handler-case
        (loop
          (let ((job (mp:with-lock (lock)
                       (loop (cond ((ordered-run-failure run) (return nil))
                                   ((ordered-run-queue run) (return (pop (ordered-run-queue run))))
                                   ((ordered-run-closed run) (return nil))
                                   (t (mp:condition-variable-wait changed lock)))))))
            (unless job (return))
            (let ((result (funcall (ordered-run-work run) (cdr job))))
              (mp:with-lock (lock)
                (unwind-protect
                     (progn (setf (gethash (car job) (ordered-run-done run))
                                  (cons (cdr job) result))
                            (emit-ready run))
                  (mp:condition-variable-broadcast changed))))))
      (serious-condition (c)
        (mp:with-lock (lock)
          (unless (ordered-run-failure run)
            (setf (ordered-run-failure run) c))
          (mp:condition-variable-broadcast changed))))))

(defun map-in-order (threads feed work emit &key (window (* 4 threads)))
  "Call FEED with one argument, SUBMIT, a function that FEED calls on each
item in turn; each item's result is (funcall WORK item), computed on one
of THREADS Lisp threads, and (funcall EMIT item result) is called for every
item in the order it was submitted, one call at a time, as soon as the item
and all submitted before it are done (on whichever thread finished last).
At most WINDOW items are submitted and not yet emitted: SUBMIT waits for
room.  THREADS 1 starts no thread: SUBMIT works and emits at once.  The
threads see the global values of special variables, not the caller's
bindings: WORK and EMIT take what they need from their closures.  A
serious condition in WORK or EMIT stops the run (nothing after that item
is emitted) and is signalled again in the caller, as is one in FEED once
the threads have stopped.  Answers the number of items."
  (when (= threads 1)
    (let ((n 0))
      (funcall feed (lambda (item)
                      (funcall emit item (funcall work item))
                      (incf n)))
      (return-from map-in-order n)))
  (let* ((run (make-ordered-run work emit window))
         (lock (ordered-run-lock run))
         (changed (ordered-run-changed run))
         (workers '()))
    (flet ((submit (item)
             (mp:with-lock (lock)
               (loop until (or (ordered-run-failure run)
                               (< (- (ordered-run-submitted run) (ordered-run-next run))
                                  (ordered-run-window run)))
                     do (mp:condition-variable-wait changed lock))
               (let ((failure (ordered-run-failure run)))
                 (when failure
                   (error failure)))
               (let ((cell (list (cons (ordered-run-submitted run) item))))
                 (if (ordered-run-queue run)
                     (setf (cdr (ordered-run-tail run)) cell)
                     (setf (ordered-run-queue run) cell))
                 (setf (ordered-run-tail run) cell))
               (incf (ordered-run-submitted run))
               (mp:condition-variable-broadcast changed))))
      (unwind-protect
           (progn
             (dotimes (i threads)
               (push (mp:process-run-function (format nil "ordered worker ~D" (1+ i))
                                              (lambda () (ordered-worker run)))
                     workers))
             (funcall feed #'submit)
             (mp:with-lock (lock)
               (setf (ordered-run-closed run) t)
               (mp:condition-variable-broadcast changed))
             (mapc #'mp:process-join workers)
             (setf workers '())
             (let ((failure (ordered-run-failure run)))
               (when failure
                 (error failure)))
             (ordered-run-submitted run))
        ;; Unwinding (an error in FEED, an interrupt): the workers finish
        ;; the item at hand and stop.
        (when workers
          (mp:with-lock (lock)
            (unless (ordered-run-failure run)
              (setf (ordered-run-failure run) :abandoned))
            (mp:condition-variable-broadcast changed))
          (mapc #'mp:process-join workers))))))
