import java.util.HashSet;
import java.util.Set;

/** Prints its arguments in the order a default java.util.HashSet they were added to iterates them. */
public class HashSetOrder {
    public static void main(String[] args) {
        Set<String> set = new HashSet<String>();
        for (String arg : args) {
            set.add(arg);
        }
        for (String item : set) {
            System.out.println(item);
        }
    }
}
