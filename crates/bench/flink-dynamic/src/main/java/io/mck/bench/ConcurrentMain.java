package io.mck.bench;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs a tool's {@code main} several times at once on parallel threads of this JVM, for
 * several rounds, so that later rounds run on a JIT-warm JVM:
 *
 * <pre>
 * ConcurrentMain ROUNDS MAIN-CLASS ARGS... [--and ARGS...]...
 * </pre>
 *
 * <p>Used for Kafka's {@code ConsumerPerformance}, one invocation per cluster. The tool's own
 * result lines go to stdout as it prints them; after each round this prints
 * {@code MCK-ROUND-END <round>}. The tool class is loaded by name from the class path, so
 * this module does not depend on Kafka's tools.
 */
public final class ConcurrentMain {
    private ConcurrentMain() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length < 2) {
            fail("usage: ConcurrentMain ROUNDS MAIN-CLASS ARGS... [--and ARGS...]...");
        }
        int rounds = Integer.parseInt(argv[0]);
        Method main = Class.forName(argv[1]).getMethod("main", String[].class);
        List<String[]> invocations = new ArrayList<>();
        List<String> current = new ArrayList<>();
        for (String a : Arrays.asList(argv).subList(2, argv.length)) {
            if (a.equals("--and")) {
                invocations.add(current.toArray(new String[0]));
                current = new ArrayList<>();
            } else {
                current.add(a);
            }
        }
        invocations.add(current.toArray(new String[0]));

        for (int round = 0; round < rounds; round++) {
            AtomicReference<Throwable> error = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < invocations.size(); i++) {
                String[] args = invocations.get(i);
                Thread t = new Thread(() -> {
                    try {
                        main.invoke(null, (Object) args);
                    } catch (InvocationTargetException e) {
                        error.compareAndSet(null, e.getCause());
                    } catch (Throwable e) {
                        error.compareAndSet(null, e);
                    }
                }, "tool-" + i);
                threads.add(t);
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            if (error.get() != null) {
                fail(argv[1] + " failed in round " + round + ": " + error.get());
            }
            System.out.println("MCK-ROUND-END " + round);
            System.out.flush();
        }
        System.exit(0);
    }

    private static void fail(String reason) {
        System.out.println("MCK-ERROR " + reason.replace('\n', ' '));
        System.out.flush();
        System.exit(1);
    }
}
