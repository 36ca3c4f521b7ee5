import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.alibaba.fastjson.JSON;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExtImpl;

/**
 * What the official 4.9.7 admin client's viewMessage answers for each CommitLog offset in the file
 * args[1], asked of the broker at args[0]. DefaultMQAdminExt.viewMessage(offsetMsgId) decodes the id
 * into the store host and the offset and asks that host; the recorded store's ids name the port it
 * was written on, not the port of the broker serving the copy, so this makes the same call
 * (MQClientAPIImpl.viewMessage(brokerAddr, offset, timeout)) with the serving broker's address.
 * One JSON line per offset: the MessageExt's fields, the body as its length and SHA-256.
 */
public class ViewMessages {
    public static void main(String[] args) throws Exception {
        String addr = args[0];
        List<String> offsets = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
        DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr("127.0.0.1:1");
        admin.setInstanceName("view-" + System.nanoTime());
        admin.start();
        Field implField = DefaultMQAdminExt.class.getDeclaredField("defaultMQAdminExtImpl");
        implField.setAccessible(true);
        DefaultMQAdminExtImpl impl = (DefaultMQAdminExtImpl) implField.get(admin);
        Field instanceField = DefaultMQAdminExtImpl.class.getDeclaredField("mqClientInstance");
        instanceField.setAccessible(true);
        MQClientInstance instance = (MQClientInstance) instanceField.get(impl);
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        for (String line : offsets) {
            if (line.isEmpty()) {
                continue;
            }
            long offset = Long.parseLong(line.trim());
            long began = System.nanoTime();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("offset", offset);
            try {
                MessageExt m = instance.getMQClientAPIImpl().viewMessage(addr, offset, 5000);
                out.put("topic", m.getTopic());
                out.put("queueId", m.getQueueId());
                out.put("queueOffset", m.getQueueOffset());
                out.put("commitLogOffset", m.getCommitLogOffset());
                out.put("storeSize", m.getStoreSize());
                out.put("msgId", m.getMsgId());
                if (m instanceof MessageClientExt) {
                    out.put("offsetMsgId", ((MessageClientExt) m).getOffsetMsgId());
                }
                out.put("keys", m.getKeys());
                out.put("tags", m.getTags());
                out.put("storeTimestamp", m.getStoreTimestamp());
                out.put("bornTimestamp", m.getBornTimestamp());
                out.put("bornHost", m.getBornHostString() + ":" + ((java.net.InetSocketAddress) m.getBornHost()).getPort());
                out.put("storeHost", String.valueOf(m.getStoreHost()));
                out.put("reconsumeTimes", m.getReconsumeTimes());
                out.put("flag", m.getFlag());
                out.put("sysFlag", m.getSysFlag());
                out.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
                out.put("bodyCRC", m.getBodyCRC());
                out.put("properties", m.getProperties());
                byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
                out.put("bodyLength", body.length);
                StringBuilder hex = new StringBuilder();
                for (byte b : sha.digest(body)) {
                    hex.append(String.format("%02x", b));
                }
                out.put("bodySha256", hex.toString());
            } catch (Throwable e) {
                out.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            long millis = (System.nanoTime() - began) / 1000000;
            if (millis > 1000) {
                System.err.println("slow: offset " + offset + " took " + millis + " ms");
            }
            System.out.println(JSON.toJSONString(out));
            System.out.flush();
        }
        System.out.println("DONE");
        System.out.flush();
        admin.shutdown();
        System.exit(0);
    }
}
