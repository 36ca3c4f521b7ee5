import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Base64;
import java.util.List;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs several mqadmin commands in one JVM (each JVM start costs seconds): each line of the file
 * named by args[0] is one command's arguments, tab-separated. What each command prints on standard
 * output is captured and written as "OUT <base64>" on its own line, in order; then "DONE".
 */
public class MqadminBatch {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
        PrintStream real = System.out;
        for (String line : lines) {
            if (line.isEmpty()) {
                continue;
            }
            ByteArrayOutputStream buffer = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(buffer, true, "UTF-8");
            System.setOut(capture);
            try {
                MQAdminStartup.main0(line.split("\t"), null);
            } finally {
                capture.flush();
                System.setOut(real);
            }
            real.println("OUT " + Base64.getEncoder().encodeToString(buffer.toByteArray()));
        }
        real.println("DONE");
        real.flush();
        System.exit(0);
    }
}
